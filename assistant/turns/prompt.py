"""Prompt building: stable system prompt first, append-only history, the per-turn part last.

Built this way so the engine's prefix cache hits turn after turn: nothing that changes per turn
(the clock, the lane) is placed before the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from assistant.engine.transcript import estimate_tokens, resumed
from assistant.records import Message

# package data (the repository's prompts/, mapped into the package by pyproject.toml), so an
# installed wheel finds them as an editable install does
PROMPTS_DIR = Path(str(resources.files("assistant.prompts")))


@dataclass(frozen=True)
class Prompts:
    """The prompt files, read once."""

    system: str
    delegate: str
    transcript: str = ""
    """The opening of a base model's chat transcript (see `TranscriptPrompt`)."""
    transcript_deep: str = ""
    """A long example answer that follows it (see `TranscriptPrompt.long_example`)."""

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
        return resumed([Message("system", self.delegate), Message("user", task)], partial)
