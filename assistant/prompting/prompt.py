"""Prompt building: stable system prompt first, append-only history, the per-turn part last.

Built this way so the engine's prefix cache hits turn after turn: nothing that changes per turn
(the clock, the lane) is placed before the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from assistant.engine.transcript import estimate_tokens, resumed
from assistant.prompting.notes import note as app_note
from assistant.prompting.notes import quoted
from assistant.records import Job, Message

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

    def chat(
        self, history: list[tuple[str, str]], text: str, budget: int, note: str = ""
    ) -> list[Message]:
        """System prompt, as many whole recent turns as fit `budget` tokens, then the request.
        `note` (this conversation's jobs, see `job_status`) is per-turn: it leads the last
        message, after the history, so the cached prefix stays the same turn after turn.
        The person's words are `quoted`: only the app's note reads as one (`notes`); the
        replies in `history` come quoted, with the app's marks, from `history.carried`."""
        text = quoted(text)
        if note:
            text = f"{note}\n\n{text}"
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
            messages += [Message("user", quoted(user)), Message("assistant", reply)]
        messages.append(Message("user", text))
        return messages

    def deep(self, task: str, partial: str = "") -> list[Message]:
        """A delegated task led by delegate.md; `partial` resumes a preempted answer."""
        return resumed([Message("system", self.delegate), Message("user", task)], partial)


RESULT_LINES = 3
RESULT_CHARS = 400


def job_status(job: Job, now: float) -> str:
    """A short status of a conversation's job for the chat request: state, elapsed, tokens
    so far, and the result's first lines when done (the reason when it failed), as the app's
    note; what it quotes of the task, the result and the error cannot end it (`notes`)."""
    elapsed = (
        job.elapsed_s if job.state in ("done", "failed", "cancelled") else now - job.created_at
    )
    task = " ".join(quoted(job.prompt).split())
    task = task if len(task) <= 120 else task[:117] + "..."
    parts = [
        f"The app's status of this conversation's job {job.id}, not written by the user:",
        f"{job.state}, {max(elapsed, 0.0):.0f} s elapsed,",
        f"{job.reasoning_tokens} reasoning and {job.answer_tokens} answer tokens so far.",
        f"Task: {task}.",
    ]
    if job.state == "done" and job.result.strip():
        result = quoted(job.result).strip()
        lines = [line for line in result.splitlines() if line.strip()][:RESULT_LINES]
        opening = "\n".join(lines)[:RESULT_CHARS]
        parts.append(f"The result begins:\n{opening}\n(the whole result is in the Jobs panel)")
    elif job.state == "failed" and job.error:
        parts.append(f"It failed: {quoted(job.error)}.")
    return app_note(" ".join(parts))
