"""Prompt building: stable system prompt first, append-only history, the per-turn part last.

Built this way so the engine's prefix cache hits turn after turn: nothing that changes per turn
(the clock, the lane) is placed before the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from assistant.records import Message

# package data (the repository's prompts/, mapped into the package by pyproject.toml), so an
# installed wheel finds them as an editable install does
PROMPTS_DIR = Path(str(resources.files("assistant.prompts")))


CONTINUE = "Continue exactly where you stopped; do not repeat anything."
"""The request that resumes a preempted answer (a transcript continues the answer itself)."""


def estimate_tokens(text: str) -> int:
    """A cheap engine-independent estimate (about 4 characters a token)."""
    return len(text) // 4 + 1


@dataclass(frozen=True)
class Prompts:
    """The prompt files, read once."""

    system: str
    delegate: str
    transcript: str = ""
    """The opening of a base model's chat transcript (see `Transcript`)."""
    transcript_deep: str = ""
    """A long example answer that follows it (see `Transcript.long_example`)."""

    @classmethod
    def load(cls, directory: Path = PROMPTS_DIR) -> Prompts:
        return cls(
            system=(directory / "system.md").read_text().strip(),
            delegate=(directory / "delegate.md").read_text().strip(),
            transcript=(directory / "transcript.md").read_text().strip(),
            transcript_deep=(directory / "transcript-deep.md").read_text().strip(),
        )

    def chat(self, history: list[tuple[str, str]], text: str, budget: int) -> list[Message]:
        """System prompt, as many whole recent turns as fit `budget` tokens, then the request."""
        used = estimate_tokens(self.system) + estimate_tokens(text)
        kept: list[tuple[str, str]] = []
        for user, reply in reversed(history):
            cost = estimate_tokens(user) + estimate_tokens(reply)
            if used + cost > budget:
                break  # the oldest whole turns go first; never half a turn
            kept.append((user, reply))
            used += cost
        messages = [Message("system", self.system)]
        for user, reply in reversed(kept):
            messages += [Message("user", user), Message("assistant", reply)]
        messages.append(Message("user", text))
        return messages

    def deep(self, task: str, partial: str = "") -> list[Message]:
        """A delegated task led by delegate.md; `partial` resumes a preempted answer."""
        messages = [Message("system", self.delegate), Message("user", task)]
        if partial:
            messages += [
                Message("assistant", partial),
                Message("user", CONTINUE),
            ]
        return messages


@dataclass(frozen=True)
class Transcript:
    """How a base model is prompted: as a transcript that opens with example exchanges, ending
    at "Assistant:", and stopped at the next speaker's turn.

    A base model given the chat format rambles on (it never learnt where a turn ends); given a
    transcript it continues the pattern and answers in the examples' length. The instruction
    prompts (system.md, delegate.md) mean nothing to it, so they are left out."""

    opening: str
    """The transcript's start: a preamble and example exchanges one line long."""
    long_example: str = ""
    """Then an example answer of several paragraphs, for tasks that ask for one."""
    user: str = "User:"
    assistant: str = "Assistant:"

    @staticmethod
    def continues(messages: list[Message]) -> bool:
        """Whether `messages` resume an answer (see `Prompts.deep`): the transcript then ends
        inside that answer, and what comes next is its continuation, spaces and all."""
        turns = [m for m in messages if m.role != "system"]
        return len(turns) >= 2 and turns[-1].content == CONTINUE and turns[-2].role == "assistant"

    def render(self, messages: list[Message], lane: str = "chat") -> str:
        """The transcript of `messages`; a resumed answer (see `Prompts.deep`) stays open."""
        turns = [m for m in messages if m.role != "system"]
        partial = ""
        if self.continues(messages):
            partial, turns = turns[-2].content, turns[:-2]
        # both lanes share the whole opening, long example included: on a one-slot engine a
        # chat turn and a resumed deep request then find it in the engine's prefix cache, and
        # only their own tail is computed again
        lines = [self.opening]
        if self.long_example:
            lines.append(self.long_example)
        for m in turns:
            speaker = self.user if m.role == "user" else self.assistant
            # one line per turn: a newline in the text must not start a turn of its own
            lines.append(f"{speaker} {' '.join(m.content.split())}")
        # the model writes the answer's leading space itself, as in the examples
        lines.append(f"{self.assistant} {partial}" if partial else self.assistant)
        return "\n".join(lines)

    def temperature(self, lane: str) -> float:
        """Greedy for short answers (a tiny model's best guess is its most likely one); some
        freedom for long ones, where greedy decoding loops."""
        return 0.0 if lane == "chat" else 0.7

    def stop(self, lane: str) -> list[str]:
        """Chat answers end at the line's end; deep answers may run over lines."""
        stops = [f"\n{self.user}", f"\n{self.assistant}"]
        return [*stops, "\n"] if lane == "chat" else stops
