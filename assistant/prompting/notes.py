"""The app's own notes in a chat request, and how they stay the app's (issue 49 item 3).

The app tells the model things no one in the conversation said: the status of this
conversation's job, and that a reply was cut while it played. Each note is wrapped in
`OPEN` ... `CLOSE`, characters the app writes and nobody else does: every text the request
quotes (the person's messages, the replies carried back, a job's task and output) has them,
and their look-alikes, turned into plain brackets first (`quoted`). So a message written to
look like a note reaches the model as the person's words, and a `]` or a `CLOSE` in a job's
task cannot end the note early or start a new one. The system prompt tells the model so.

A marker rather than a system message after the history: chat templates differ on a second
system message (the tiny test model's drops it, Gemma's and Mistral's refuse the request) and
a base model's transcript (`assistant.engine.transcript`) has no system turn at all; the
marked note reaches every engine kind the same way, at the head of the last user message.
"""

from __future__ import annotations

OPEN = "\u27e6"  # ⟦
CLOSE = "\u27e7"  # ⟧
_PLAIN = str.maketrans(
    {
        OPEN: "[",
        CLOSE: "]",
        "\u301a": "[",  # 〚 〛: white square brackets, the same look
        "\u301b": "]",
        "\u27ec": "[",  # ⟬ ⟭
        "\u27ed": "]",
    }
)


def quoted(text: str) -> str:
    """`text` as a request may carry it without it passing for the app's note."""
    return text.translate(_PLAIN)


def note(words: str) -> str:
    """The app's note of `words`; whatever they quote must already be `quoted`."""
    return f"{OPEN}{words}{CLOSE}"


def notes_in(text: str) -> list[str]:
    """The app's notes in `text`, as the model can tell them apart (for tests and checks)."""
    found, rest = [], text
    while OPEN in rest and CLOSE in rest.split(OPEN, 1)[1]:
        inner, rest = rest.split(OPEN, 1)[1].split(CLOSE, 1)
        found.append(inner)
    return found
