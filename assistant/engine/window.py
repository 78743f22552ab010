"""The engine's context window: every request is fitted to it (issue 48, DESIGN.md 9).

A conversation grows without end and the engine's window does not: vLLM refuses a request
whose prompt and answer budget exceed `max_model_len` (HTTP 400), and then every later turn of
that conversation is refused too. So each request is fitted before it is sent: the system
prompt and the last message (with the job-status note it carries) are kept, the oldest whole
turns are left out first, and the reply keeps its room (the lane's budget, at most half the
window); the answer's `max_tokens` is what is left. Nothing stored is touched: only what this
request carries.

Tokens are counted without the engine's tokenizer: bytes of text times a rate. The first rate
(`START_RATE`, a token a byte) is the most any tokenizer spends on text (a byte-level one with
no merges, as the real-vLLM tier's tiny model; real models spend 0.15 to 0.4), so no request is
refused before the engine has counted one; each answer's usage then tells how many prompt tokens
the engine counted, and the rate follows the highest it has seen, with `MARGIN`. Should the
engine still refuse a request for its length (its text costs more than any before it),
`refused` learns the engine's counts from the refusal, and the request is fitted again with
them, once (`engine.generation`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from assistant.engine.transcript import TranscriptPrompt
from assistant.errors import BadInput, EngineError
from assistant.records import Message

START_RATE = 1.0
"""Tokens a byte of text is taken to cost until the engine has counted one of our prompts."""
MARGIN = 1.15
"""The learnt rate is the highest seen times this: the next prompt's text may cost more."""
PER_MESSAGE = 16
"""Bytes counted for each message's template (role markers, separators)."""
SLACK = 16
"""Tokens of the window never planned for (the template's fixed tokens, rounding)."""
REPLY_SHARE = 2
"""The reply's room is its lane's budget, at most the window over this."""
MIN_SHARE = 4
"""The reply gets at least its room over this, or the request is refused (`ContextFull`)."""
LEARN_FROM = 512
"""Bytes a prompt must weigh for its count to be learnt: a shorter one is mostly template (the
doctor's "Hello" would teach an English model's window twice its real rate, for good)."""


class ContextFull(BadInput):
    """The request cannot fit the engine's context window even with every earlier turn out."""


class ContextRefused(EngineError):
    """The engine refused a request for its length (HTTP 400) although it was fitted: the
    window has learnt from the refusal, and a request fitted again is expected to pass."""


@dataclass(frozen=True)
class Fitted:
    """A request fitted to the window."""

    messages: list[Message]
    max_tokens: int
    """The answer's budget: the lane's, or what is left of the window if that is less."""
    dropped: int = 0
    """Earlier turns (a request and its reply) left out of this request."""


_SIZE = (r"maximum context length is (\d+)", r"max_model_len\D{0,3}(\d+)", r"n_ctx\D{0,4}(\d+)")
_PROMPT = (
    r"prompt contains (at least )?(\d+) input tokens",  # vLLM 0.32
    r"request has ()(\d+) input tokens",  # older vLLM
    r"()(\d+) in (?:the messages|your prompt)",  # older vLLM, llama-cpp-python
    r"n_prompt_tokens\D{0,4}()(\d+)",  # llama.cpp's server
)


class Window:
    """The context window of one engine, in tokens, and the rate its tokens are counted at."""

    def __init__(self, size: int | None = None, rate: float = START_RATE):
        self.size = size
        """Tokens of prompt and answer together; None: not known, and nothing is fitted."""
        self.rate = rate
        """Tokens a byte of text is counted at (`rate`: the first, where the model is known)."""
        self.counted = False
        """The engine has counted one of our prompts (the rate is learnt, not assumed)."""

    @staticmethod
    def weight(messages: list[Message], extra: int = 0) -> int:
        """What a request is counted by: its bytes, each message's template, and `extra`
        (the tools' declarations, a transcript's opening)."""
        return sum(len(m.content.encode()) + PER_MESSAGE for m in messages) + extra

    def count(self, messages: list[Message], extra: int = 0) -> int:
        """Prompt tokens of `messages`, estimated on the safe side."""
        return math.ceil(self.weight(messages, extra) * self.rate) + SLACK

    def room(self, budget: int) -> int:
        """Tokens kept free for the reply: the lane's `budget`, at most a share of the window."""
        return budget if not self.size else min(budget, self.size // REPLY_SHARE)

    def fit(self, messages: list[Message], budget: int, extra: int = 0) -> Fitted:
        """`messages` with as many of their newest turns as fit beside the reply's room; the
        system prompt and the last message (a resumed answer's last three) always stay.
        Raises ContextFull if even they leave the reply too little."""
        if not self.size:
            return Fitted(messages, budget)
        head = 1 if messages and messages[0].role == "system" else 0
        keep = 3 if TranscriptPrompt.continues(messages) else 1
        keep = min(keep, len(messages) - head)
        turns = messages[head : len(messages) - keep]
        fixed = [*messages[:head], *messages[len(messages) - keep :]]
        limit = math.floor((self.size - self.room(budget) - SLACK) / self.rate)
        left = limit - self.weight(fixed, extra) - self.weight(turns)
        dropped, start = 0, 0
        while start < len(turns) and left < 0:
            # a request and its reply go together: never half a turn
            pair = turns[start + 1 : start + 2]
            step = 2 if pair and turns[start].role == "user" and pair[0].role != "user" else 1
            left += self.weight(turns[start : start + step])
            start, dropped = start + step, dropped + 1
        kept = [*messages[:head], *turns[start:], *messages[len(messages) - keep :]]
        return Fitted(kept, self.answer(kept, budget, extra), dropped)

    def answer(
        self, messages: list[Message], budget: int, extra: int = 0, what: str = "the request"
    ) -> int:
        """The answer's budget for `messages` as they are: `budget`, or what is left of the
        window; ContextFull (naming the limit) if that is under the least a reply needs."""
        if not self.size:
            return budget
        prompt = self.count(messages, extra)
        left = self.size - prompt
        least = max(16, self.room(budget) // MIN_SHARE)
        if left < least:
            raise ContextFull(
                f"{what} is too long for the engine's context window: about {prompt} tokens "
                f"with the instructions, and the window is {self.size} tokens, of which at "
                f"least {least} must stay for the answer; shorten it (or give the engine a "
                "bigger context, e.g. vLLM's --max-model-len)"
            )
        return min(budget, left)

    def learn(self, weight: int, prompt_tokens: int) -> None:
        """The engine counted `prompt_tokens` for a request of `weight`: follow the highest
        rate seen (the first count replaces the assumed rate)."""
        if weight < LEARN_FROM or prompt_tokens <= 0:
            return
        seen = min(4.0, max(0.05, prompt_tokens / weight)) * MARGIN
        self.rate = seen if not self.counted else max(self.rate, seen)
        self.counted = True

    def refused(self, message: str, weight: int) -> bool:
        """Whether an engine's refusal (HTTP 400) of a request of `weight` is for its length;
        if so, what it says is learnt: its window, and its count of the prompt (when it says
        only "at least" so many, or no count, the rate becomes the most text can cost)."""
        text = message.lower()
        if not re.search(r"context (length|size|window)|max_model_len|n_ctx", text):
            return False
        unknown = self.size is None
        for pattern in _SIZE:
            if (found := re.search(pattern, text)) and int(found[1]) > 0:
                self.size = min(self.size or int(found[1]), int(found[1]))
                break
        if unknown and "cannot be greater than" in text:
            return True  # the budget was over a window not known until now: the rate holds
        seen, exact = 0.0, False
        for pattern in _PROMPT:
            if (found := re.search(pattern, text)) and weight > 0:
                seen, exact = int(found[2]) / weight * MARGIN, not found[1]
                break
        if exact:
            self.rate = max(self.rate * 1.1, seen)
        else:  # "at least" so many, or no count: the most text can cost (or twice the rate)
            self.rate = max(START_RATE if self.rate < START_RATE else self.rate * 2, seen)
        self.counted = True
        return True
