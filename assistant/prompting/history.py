"""A conversation's stored turns as the next request carries them.

Answered turns, and turns the person stopped (as far as they were heard, marked as cut); not
failed ones. The request is then fitted to the engine's context window, which may leave the
oldest of them out (`assistant.engine.window`); the turn where that first happens says so,
once (`out_of_view`), and nothing stored is deleted.
"""

from __future__ import annotations

from assistant.records import STOPPED, TurnResult

INTERRUPTED_MARK = " [interrupted]"
"""After a reply the person stopped: the model reads that it was cut, and where."""


def carried(turns: list[tuple[str, TurnResult]]) -> list[tuple[str, str]]:
    """(request, reply) of each stored turn the next request carries, oldest first."""
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
        return result.reply
    return (result.reply + INTERRUPTED_MARK).strip()
