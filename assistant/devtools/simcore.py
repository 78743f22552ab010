"""The simulated engine's parts: its settings, slots, sequences and raw ASGI/SSE helpers."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import heapq
import itertools
import json
import logging
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, field, fields
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive


@dataclass
class SimConfig:
    model: str = "sim-model"
    kind: str = "vllm"  # "llamacpp": priority is ignored (no rejection), /props reports slots
    max_model_len: int = 32768
    # how prompts are counted: 0 a token a word (and 4 a message); N a token every N characters,
    # as a byte-level tokenizer spends one a byte (the real-vLLM tier's tiny model: 1)
    token_chars: float = 0.0
    slots: int = 4
    priority_policy: bool = False  # like vLLM's --scheduling-policy priority
    # vLLM 0.32 accepts a non-zero priority under FCFS and ignores it; older vLLM rejected it
    reject_priority: bool = False
    # like vLLM's --enable-auto-tool-choice --tool-call-parser: without it, tools with
    # tool_choice unset or "auto" are refused with HTTP 400
    auto_tool_choice: bool = False
    prefill_ms: float = 0.0  # fixed delay before the first token
    prefill_ms_per_token: float = 0.0  # per prompt token not served by the prefix cache
    token_ms: float = 5.0  # per output token, per slot
    busy_slowdown: float = 0.0  # token_ms grows by this fraction per other busy slot
    reasoning_field: str = "reasoning"  # vLLM's new name; "reasoning_content" is the old one
    reasoning_tokens: int = 24  # reasoning words before the answer when thinking
    thinking_efforts: tuple[str, ...] = ("high",)  # efforts that turn thinking on by default
    # a request with neither enable_thinking nor an effort thinks, as a Qwen3/GLM chat template
    # does on vLLM (measured on vLLM 0.32 with a Qwen3-style template)
    template_thinks: bool = False
    answer_words: int = 0  # 0: one rendition of REPLY; N: REPLY repeated to exactly N words
    interrupt_on_new: bool = False  # llama.cpp-server-like: a new request cuts the running one
    fault: str = ""  # default fault for every request
    fail_first: int = 0  # the first N requests fail with fail_status
    fail_status: int = 503
    retry_after: int = 1
    cut_after: int = 5
    stall_s: float = 3600.0
    kv_tokens: int = 65536  # KV pool size in tokens, for vllm:kv_cache_usage_perc


class Slots:
    """`n` sequence slots with a waiting queue ordered by (priority, arrival): FIFO when all
    priorities are equal, which is how vLLM's waiting queue behaves."""

    def __init__(self, n: int) -> None:
        self.n, self.running = n, 0
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(1 for *_, f in self._heap if not f.done())

    async def acquire(self, priority: int) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (priority, next(self._seq), fut))
        self.wake()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted just as the client left
                self.release()
            raise

    def release(self) -> None:
        self.running -= 1
        self.wake()

    def wake(self) -> None:
        while self._heap and self.running < self.n:
            *_, fut = heapq.heappop(self._heap)
            if not fut.done():  # cancelled waiters are skipped here, not searched for
                self.running += 1
                fut.set_result(None)


@dataclass(eq=False)  # identity hashing: kept in a set while running
class Seq:
    """A request holding a slot: what KV usage and interruption need to know."""

    tokens: int
    cut: asyncio.Event = field(default_factory=asyncio.Event)


class Cut(Exception):
    """Abort the response: the client sees a closed connection, not a clean end."""


def words(text: str) -> int:
    return len(text.split())


def prompt_tokens(cfg: SimConfig, body: dict[str, Any]) -> int:
    """The request's prompt tokens as the simulated engine counts them (`cfg.token_chars`)."""
    texts = [text_of(m.get("content")) for m in body["messages"]]
    if cfg.token_chars <= 0:
        return sum(words(t) + 4 for t in texts)
    # a byte-level tokenizer: each message's template (role markers, ends of turn) and the
    # tools declared in the system prompt count like text, and the generation prompt after it
    size = sum(len(t.encode()) + 12 for t in texts) + len(json.dumps(body.get("tools") or ""))
    return math.ceil(size / cfg.token_chars) + 8


def text_of(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def start(headers: list[tuple[bytes, bytes]]) -> Message:
    return {"type": "http.response.start", "status": 200, "headers": headers}


def sse(obj: Any) -> Message:
    return part(f"data: {json.dumps(obj)}\n\n".encode())


def part(data: bytes, more: bool = True) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": more}


async def watch_disconnect(receive: Receive, work: asyncio.Task[None], left: asyncio.Event) -> None:
    """A client that goes away frees its slot, as in a real engine (it aborts the request)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    left.set()
    work.cancel()


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    kind = {400: "BadRequestError", 429: "RateLimitError"}.get(status, "ServiceUnavailableError")
    payload = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return JSONResponse(payload, status_code=status, headers=headers)


ASKS_FOR_PROMPT = re.compile(
    r"\b(?:reveal|repeat|print|show|tell me)\b.*\b(?:system prompt|instructions)\b", re.I
)
"""A request to reveal the instructions, which the simulated model obeys."""


class QuietCuts(logging.Filter):
    """A deliberate cut is the point of the simulator, not an error worth a log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "without completing response" not in record.getMessage()


def parse_args(
    argv: list[str] | None, description: str | None
) -> tuple[argparse.Namespace, SimConfig]:
    p = argparse.ArgumentParser(
        prog="python -m assistant.devtools.simengine",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    choices = {"kind": ["vllm", "llamacpp"], "reasoning_field": ["reasoning", "reasoning_content"]}
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--log-level", default="warning")
    for f in fields(SimConfig):
        flag, default = "--" + f.name.replace("_", "-"), f.default
        if isinstance(default, bool):
            p.add_argument(flag, action="store_true", default=default)
        elif isinstance(default, tuple):
            p.add_argument(flag, nargs="*", default=list(default))
        else:
            p.add_argument(flag, type=type(default), default=default, choices=choices.get(f.name))
    args = p.parse_args(argv)
    values = {f.name: getattr(args, f.name) for f in fields(SimConfig)}
    values["thinking_efforts"] = tuple(values["thinking_efforts"])
    return args, SimConfig(**values)


# vLLM's own wording, so clients that match on it are tested against the real text.
PRIORITY_MSG = "Got priority {p} but Priority scheduling is not enabled."
TOOLS_MSG = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
CONTEXT_MSG = (
    "This model's maximum context length is {n} tokens. However, your prompt contains {q}{p} "
    "input tokens, which exceeds this limit even without any output tokens. "
    "Please reduce the length of the input prompt. (parameter=input_tokens, value={p})"
)
BUDGET_MSG = (
    "{param}={c} cannot be greater than max_model_len={n}. Please request fewer output tokens. "
    "(parameter={param}, value={c})"
)


def refusal(cfg: SimConfig, body: dict[str, Any], priority: int, prompt: int, budget: int) -> str:
    """Why vLLM would refuse this request with HTTP 400 ('' if it would not)."""
    if priority != 0 and cfg.reject_priority and not cfg.priority_policy:
        return PRIORITY_MSG.format(p=priority)  # vLLM before 0.32; 0.32 ignores it
    interval = body.get("stream_interval")
    if interval is not None and (not isinstance(interval, int) or interval < 1):
        return "stream_interval: Input should be greater than or equal to 1"
    auto_tools = body.get("tools") and body.get("tool_choice") in (None, "auto")
    if auto_tools and cfg.kind == "vllm" and not cfg.auto_tool_choice:
        return TOOLS_MSG
    # vLLM 0.32: a budget over the window, or a prompt over it, is refused; a prompt that fits
    # with less room than its budget gets the budget cut to the room (see `SimEngine.plan`)
    n = cfg.max_model_len
    if budget > n:
        param = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
        return BUDGET_MSG.format(param=param, c=budget, n=n)
    if prompt > n:  # it tokenizes no more than one token past the window
        counted = min(prompt, n + 1)
        return CONTEXT_MSG.format(n=n, q="at least " if counted == n + 1 else "", p=counted)
    return ""


def metrics_text(model: str, slots: Any, kv: float, counters: dict[str, int]) -> str:
    """vLLM's /metrics for the simulator's state (`slots`: a `Slots`)."""
    rows = [
        ("num_requests_running", "gauge", slots.running),
        ("num_requests_waiting", "gauge", slots.waiting),
        ("kv_cache_usage_perc", "gauge", kv),
        ("prefix_cache_queries_total", "counter", counters["prefix_queries"]),
        ("prefix_cache_hits_total", "counter", counters["prefix_hits"]),
        ("prompt_tokens_total", "counter", counters["prompt"]),
        ("generation_tokens_total", "counter", counters["gen"]),
    ]
    return prometheus_text(f'{{engine="0",model_name="{model}"}}', rows)


def prometheus_text(label: str, rows: list[tuple[str, str, float]]) -> str:
    """vLLM's /metrics text: `vllm:NAME{labels} VALUE` with its TYPE line, per row."""
    lines = []
    for name, kind, value in rows:
        lines += [f"# TYPE vllm:{name} {kind}", f"vllm:{name}{label} {float(value)}"]
    return "\n".join(lines) + "\n"


class PrefixCache:
    """Every cumulative prefix of a conversation counts as cached KV, most recent kept."""

    def __init__(self, keep: int = 10000):
        self.keep = keep
        self.hashes: OrderedDict[str, None] = OrderedDict()

    @staticmethod
    def _hashes(messages: list[dict[str, Any]]) -> list[tuple[str, int]]:
        h, out, n = hashlib.sha256(), [], 0
        for m in messages:
            content = text_of(m.get("content"))
            h.update(json.dumps([m.get("role"), content]).encode())
            n += words(content) + 4  # +4: role and template tokens, roughly
            out.append((h.copy().hexdigest(), n))
        return out

    def lookup(self, messages: list[dict[str, Any]]) -> int:
        """Prompt tokens of `messages` found cached (the longest cached prefix)."""
        return max((n for hx, n in self._hashes(messages)[:-1] if hx in self.hashes), default=0)

    def store(self, messages: list[dict[str, Any]]) -> None:
        for hx, _ in self._hashes(messages):
            self.hashes[hx] = None
            self.hashes.move_to_end(hx)
        while len(self.hashes) > self.keep:
            self.hashes.popitem(last=False)
