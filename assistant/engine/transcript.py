"""Requests as transcripts of turns: the request that resumes a cut answer, and a base model's
prompt (a transcript that the model continues).

Both belong to the engine call, not to the conversation: a deep answer preempted on the deep
lane is resumed by `assistant.engine.generation` with `resumed`, and the engine client renders
a base model's request with `TranscriptPrompt`.
"""

from __future__ import annotations

from dataclasses import dataclass

from assistant.records import Message

CONTINUE = "Continue exactly where you stopped; do not repeat anything."
"""The request that resumes a preempted answer (a transcript continues the answer itself)."""


def estimate_tokens(text: str) -> int:
    """A cheap engine-independent estimate (about 4 characters a token)."""
    return len(text) // 4 + 1


def resumed(messages: list[Message], partial: str) -> list[Message]:
    """`messages` as the request that continues `partial`, an answer to them cut short (a
    preempted deep answer); `messages` themselves when nothing was generated yet."""
    if not partial:
        return messages
    return [*messages, Message("assistant", partial), Message("user", CONTINUE)]


@dataclass(frozen=True)
class TranscriptPrompt:
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
