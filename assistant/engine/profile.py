"""How each engine kind wants a lane's request shaped, and how it says it refuses a part of it.

vLLM takes priority, reasoning effort, a thinking switch and batched chunks; llama.cpp's server
none of them; OpenAI reasoning effort only. A refusal (HTTP 400 naming the field) is learned
once by the client (`assistant.engine.client`), which sends the request again without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai

from assistant.settings import LaneConfig


@dataclass(frozen=True)
class Profile:
    """How one engine kind wants a lane's request shaped."""

    kind: str
    priority: bool
    effort: bool
    thinking_switch: bool
    batching: bool = False
    """Takes a per-request `stream_interval` (vLLM), with usage on every chunk."""

    def shape(
        self,
        lane: LaneConfig,
        *,
        thinking: bool,
        max_tokens: int,
        use_priority: bool,
        use_batching: bool = True,
    ) -> dict:
        params: dict[str, Any] = {"max_tokens": max_tokens}
        extra: dict[str, Any] = {}
        if self.effort:
            params["reasoning_effort"] = lane.reasoning_effort if thinking else "low"
        if self.thinking_switch:
            extra["chat_template_kwargs"] = {"enable_thinking": thinking}
        if self.priority and use_priority:
            extra["priority"] = lane.priority
        if self.kind == "openai":
            # OpenAI's reasoning models reject max_tokens; max_completion_tokens is the budget
            params["max_completion_tokens"] = params.pop("max_tokens")
        if self.kind in ("vllm", "openai"):
            params["stream_options"] = {"include_usage": True}
        if self.batching and use_batching and lane.stream_interval > 1:
            extra["stream_interval"] = lane.stream_interval
            # a chunk holds many tokens now: the engine counts them on every chunk
            params["stream_options"]["continuous_usage_stats"] = True
        if extra:
            params["extra_body"] = extra
        return params


PROFILES = {
    "vllm": Profile("vllm", priority=True, effort=True, thinking_switch=True, batching=True),
    # llama-cpp-python's server has neither request priority nor a thinking switch
    "llamacpp": Profile("llamacpp", priority=False, effort=False, thinking_switch=False),
    "openai": Profile("openai", priority=False, effort=True, thinking_switch=False),
}


def priority_rejected(err: openai.APIStatusError) -> bool:
    text = str(err).lower()
    return err.status_code == 400 and "priority" in text


def batching_refused(err: openai.APIStatusError) -> bool:
    """An engine (an older vLLM) that does not know `stream_interval` or continuous usage."""
    text = str(err).lower()
    return err.status_code == 400 and ("stream_interval" in text or "continuous_usage" in text)


def tools_refused(err: openai.APIStatusError) -> bool:
    """vLLM without --enable-auto-tool-choice: '"auto" tool choice requires
    --enable-auto-tool-choice and --tool-call-parser to be set' (HTTP 400)."""
    text = str(err).lower()
    return err.status_code == 400 and "tool" in text and ("choice" in text or "parser" in text)


TOOLS_REFUSED = (
    "the engine refuses tools (vLLM: start it with --enable-auto-tool-choice "
    "--tool-call-parser ...); chat turns go without them and the model's own delegate step "
    "is off (the cue and classifier steps still route)"
)
