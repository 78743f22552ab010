"""A conversation's stored turns as the next request carries them.

Answered turns, and turns the person stopped (as far as they were heard, marked as cut); not
failed ones. The request is then fitted to the engine's context window, which may leave the
oldest of them out (`assistant.engine.window`); the turn where that first happens says so,
once (`out_of_view`), and nothing stored is deleted.
"""

from __future__ import annotations

from assistant.prompting.notes import note, quoted
from assistant.records import STOPPED, TurnResult

INTERRUPTED_MARK = " " + note("interrupted")
"""After a reply the person stopped: the model reads that it was cut, and where; the app's
note (`assistant.prompting.notes`), which no reply or message can imitate."""


def carried(turns: list[tuple[str, TurnResult]]) -> list[tuple[str, str]]:
    """(request, reply) of each stored turn the next request carries, oldest first; the reply
    `quoted`, with the app's mark when it was cut (`Prompts.chat` quotes the request)."""
    return [(user, _as_heard(result)) for user, result in turns if _in_history(result)]


def out_of_view(turns: list[tuple[str, TurnResult]]) -> bool:
    """Whether an earlier turn's request already left turns out (and the page said so)."""
    return any(result.dropped for _, result in turns)


def _in_history(result: TurnResult) -> bool:
    """A turn the next prompt carries: answered, or stopped by the person (with what of its
    reply was heard, perhaps nothing: their words still were said); a failed one is not."""
    return result.error == STOPPED or (bool(result.reply) and not result.error)


def _as_heard(result: TurnResult) -> str:
    if result.error != STOPPED:
        return quoted(result.reply)
    return (quoted(result.reply) + INTERRUPTED_MARK).strip()
