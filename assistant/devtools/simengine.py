"""A simulated OpenAI-compatible engine that misbehaves on purpose, over real HTTP.

Tests and benchmarks need an engine with vLLM 0.32's observable behaviour (priority ignored
without `--priority-policy`, or refused with `--reject-priority` like older vLLM; tools refused
unless `--auto-tool-choice`; the `reasoning` field; Prometheus metrics; a FIFO queue in front of
a few slots; prefill time; `ignore_eos`) and the failures of DESIGN.md section 9 on demand.
`python -m assistant.devtools.simengine --port 0` prints `READY port=N`. Checked against vLLM.

Faults come from `--fault`, the `X-Sim-Fault` header or a `sim_fault` body field (header first),
so one process can serve many tests. Syntax `name[:arg[:tag]]`:
  stall[:K]   role chunk and K tokens, then the connection stays open with nothing more
  hang        no response bytes at all (not even headers)
  cut[:K]     close the connection after K tokens, without [DONE]
  503[:N] / 429[:N]   fail with that status (and Retry-After); with N only the first N requests
              carrying this exact fault string fail (a third `:tag` part keeps counters apart)
  reasoning_only                 reason until the budget ends: no content, finish "length"
  reasoning_only_when_thinking   the same only when thinking is on, else a normal answer
  reasoning_stop                 reason, then stop ("stop") with no answer: thinking never closed
  hold:K      K tokens, then nothing more until POST /sim/release (tests order events by it);
              POST /sim/hold makes every request without a fault hold:0 until the release
Tests read what clients sent with GET /sim/requests and clear state with POST /sim/reset.

Like a model with no defences, it obeys a request to reveal its system prompt or
instructions: the reply then repeats the system message (what the app must not show).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import socket
import time
from collections import deque
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from assistant.devtools.simcore import (  # noqa: F401  (the messages: tests match on them)
    ASKS_FOR_PROMPT,
    PRIORITY_MSG,
    TOOLS_MSG,
    Cut,
    PrefixCache,
    QuietCuts,
    Seq,
    SimConfig,
    Slots,
    error,
    metrics_text,
    parse_args,
    part,
    prompt_tokens,
    refusal,
    sse,
    start,
    text_of,
    watch_disconnect,
    words,
)

REPLY = (
    "You said: {t}. This is a simulated reply. It has several sentences so speech can start early."
)
REASONING = "Let me think about this carefully, step by step, before I answer the question."
JSON = [(b"content-type", b"application/json")]


class SimEngine:
    def __init__(self, config: SimConfig) -> None:
        self.cfg = config
        self.slots = Slots(1 if config.interrupt_on_new else config.slots)
        self.reset()

    def reset(self) -> None:
        self.requests: deque[dict[str, Any]] = deque(maxlen=10000)  # bounded for load runs
        self.fault_counts: dict[str, int] = {}
        self.failed_first = 0
        self.prefixes = PrefixCache()
        self.running: set[Seq] = set()
        self.counters = dict.fromkeys(("prefix_queries", "prefix_hits", "prompt", "gen"), 0)
        self.ids = itertools.count(1)
        self.released = asyncio.Event()  # POST /sim/release: held streams go on
        self.holding = False  # POST /sim/hold: every request holds before its first token

    # -- the reply -------------------------------------------------------------------------
    def plan(self, body: dict[str, Any], fault: str, prompt: int) -> dict[str, Any]:
        """Decide all output up front: reasoning words, content words, tool call, finish."""
        cfg, users = self.cfg, [m for m in body["messages"] if m.get("role") == "user"]
        user = " ".join(text_of(users[-1].get("content")).split()) if users else ""
        kwargs = body.get("chat_template_kwargs") or {}
        # An explicit enable_thinking wins; otherwise the effort decides (vLLM/GLM-like); with
        # neither, the chat template's default (Qwen3/GLM templates think: --template-thinks)
        effort = body.get("reasoning_effort")
        default = effort in cfg.thinking_efforts if effort else cfg.template_thinks
        thinking = kwargs.get("enable_thinking", default)
        left = cfg.max_model_len - prompt
        budget = max(
            1, min(body.get("max_completion_tokens") or body.get("max_tokens") or left, left)
        )
        exhaust = fault == "reasoning_only" or (
            fault == "reasoning_only_when_thinking" and thinking
        )
        n_reason = min(budget, budget if exhaust else cfg.reasoning_tokens if thinking else 0)
        reason = (REASONING.split() * (n_reason // 10 + 1))[:n_reason]
        tool, answer = None, REPLY.format(t=user).split()
        system = " ".join(
            text_of(m.get("content")) for m in body["messages"] if m.get("role") == "system"
        )
        if system and ASKS_FOR_PROMPT.search(user):
            answer = ("Sure. My instructions say: " + system).split()
        if body.get("tools") and body.get("tool_choice") != "none" and "SIMDELEGATE" in user:
            names = [t.get("function", {}).get("name") for t in body["tools"]]
            task = " ".join(user.replace("SIMDELEGATE", " ").split())
            tool = ("delegate" if "delegate" in names else names[0], json.dumps({"task": task}))
            answer = []
        elif cfg.answer_words or body.get("ignore_eos"):
            # ignore_eos (vLLM): the answer runs on to the whole budget
            n = budget if body.get("ignore_eos") else cfg.answer_words
            answer = (answer * (n // len(answer) + 1))[:n]
        if fault == "reasoning_stop":
            n = min(budget, cfg.reasoning_tokens)
            reason, answer = (REASONING.split() * (n // 10 + 1))[:n], []
        content = answer[: budget - len(reason)]
        finish = "tool_calls" if tool else "stop"
        if body.get("ignore_eos") or exhaust or len(content) < len(answer):
            finish, tool = "length", None
        return {"reason": reason, "content": content, "tool": tool, "finish": finish}

    # -- the chat completions endpoint, raw ASGI so a "cut" can really drop the connection --
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)

        async def reject(status: int, message: str, headers: dict[str, str] | None = None) -> None:
            await error(status, message, headers)(scope, receive, send)

        try:
            body = await request.json()
            assert isinstance(body, dict) and isinstance(body.get("messages"), list)
            assert body["messages"]
        except Exception:
            return await reject(400, "Expected a JSON body with a non-empty 'messages' list.")
        headers = dict(request.headers)
        self.requests.append({"received_at": time.time(), "body": body, "headers": headers})
        spec = str(headers.get("x-sim-fault") or body.get("sim_fault") or self.cfg.fault)
        name, _, arg = spec.strip().lower().partition(":")
        if not name and self.holding:
            name, arg = "hold", "0"
        arg = arg.partition(":")[0]  # a third part is only a tag that keeps counters apart
        arg = arg if arg.isdigit() else ""
        priority = body.get("priority") or 0
        prompt = prompt_tokens(self.cfg, body)
        budget = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        if not isinstance(priority, int) or not isinstance(budget, int):
            return await reject(400, "'priority' and 'max_tokens' must be integers.")
        if refused := refusal(self.cfg, body, priority, prompt, budget):
            return await reject(400, refused)
        if status := self._failure(spec, name, arg):
            retry = {"Retry-After": str(self.cfg.retry_after)}
            return await reject(status, f"Simulated {status}.", retry)
        if self.cfg.interrupt_on_new:
            for seq in self.running:
                seq.cut.set()
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        priority = priority if self.cfg.priority_policy else 0
        work = asyncio.create_task(self._serve(body, name, arg, priority, prompt, tracked))
        left = asyncio.Event()
        watcher = asyncio.create_task(watch_disconnect(receive, work, left))
        try:
            await work
        except asyncio.CancelledError:
            if not left.is_set():
                raise
        except Cut:
            # Returning without the final body message makes uvicorn close the socket: the
            # client sees a truncated response, exactly like an engine that died mid-answer.
            if not started:
                await send(start(JSON))
                await send(part(b'{"id": "'))
        finally:
            watcher.cancel()

    def _failure(self, spec: str, name: str, arg: str) -> int:
        if name in ("503", "429", "500", "502"):
            seen = self.fault_counts[spec] = self.fault_counts.get(spec, 0) + 1
            return int(name) if not arg or seen <= int(arg) else 0
        if self.failed_first < self.cfg.fail_first:
            self.failed_first += 1
            return self.cfg.fail_status
        return 0

    async def _serve(
        self, body: dict[str, Any], fault: str, arg: str, priority: int, prompt: int, send: Send
    ) -> None:
        cfg, stream, messages = self.cfg, bool(body.get("stream")), body["messages"]
        if fault == "hang":
            await asyncio.sleep(cfg.stall_s)
        plan = self.plan(body, fault, prompt)
        base = {"id": f"chatcmpl-sim-{next(self.ids)}", "created": int(time.time())}
        base |= {"model": cfg.model, "object": "chat.completion.chunk"}

        # vLLM's per-request batching: tokens per chunk (the first and last at once), and
        # the running token count on every chunk when asked
        interval, generated = max(1, int(body.get("stream_interval") or 1)), 0
        counting = (body.get("stream_options") or {}).get("continuous_usage_stats")

        async def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            n = {"prompt_tokens": prompt, "completion_tokens": generated}
            extra = {"usage": n | {"total_tokens": prompt + generated}} if counting else {}
            await send(sse(base | {"choices": [choice]} | extra))

        pending: dict[str, str] = {}  # text not yet sent, and the tokens sent so far
        sent = 0

        async def flush() -> None:
            nonlocal sent
            if pending:
                await chunk(pending.copy())
            pending.clear()
            sent = generated

        stop_at = -1  # the token index where a cut, stall or interrupt fault strikes
        if fault in ("stall", "cut", "interrupt", "hold"):
            stop_at = int(arg or (0 if fault in ("stall", "hold") else cfg.cut_after))
        if stream:  # headers at once, like vLLM; the first chunk comes after prefill
            await send(start([(b"content-type", b"text/event-stream")]))
        await self.slots.acquire(priority)
        seq = Seq(prompt)
        self.running.add(seq)
        try:
            hit = self.prefixes.lookup(messages)
            self.counters["prefix_queries"] += prompt
            self.counters["prefix_hits"] += hit
            self.counters["prompt"] += prompt
            await self._sleep(
                seq, (cfg.prefill_ms + cfg.prefill_ms_per_token * (prompt - hit)) / 1e3
            )
            if stream:
                await chunk({"role": "assistant", "content": ""})
            tokens = [(cfg.reasoning_field, w) for w in plan["reason"]]
            tokens += [("content", w) for w in plan["content"]]
            tokens += [("tool", "")] * (8 if plan["tool"] else 0)  # a tool call costs tokens too
            out: dict[str, list[str]] = {cfg.reasoning_field: [], "content": [], "tool": []}
            next_t = time.monotonic()
            for i, token in enumerate([*tokens, None]):
                if i == stop_at and fault == "hold":
                    await self.released.wait()
                    next_t = time.monotonic()
                elif fault != "hold" and (i == stop_at or (token is None and stop_at > i)):
                    if fault == "cut":
                        raise Cut
                    if fault == "interrupt" and stream:
                        # like llama-cpp-python when another request arrives: a clean end
                        # with no finish reason
                        await send(part(b"data: [DONE]\n\n", more=False))
                        return
                    await asyncio.sleep(cfg.stall_s)  # cancelled when the client gives up
                if token is None:
                    await self._sleep(seq, next_t - time.monotonic())  # the last token's time
                    await flush()
                    break
                # An absolute schedule keeps long answers at the set speed.
                next_t += cfg.token_ms * (1 + cfg.busy_slowdown * (self.slots.running - 1)) / 1e3
                # inside a batch nothing is sent: the time is slept once, before its chunk
                if sent == 0 or generated + 1 - sent >= interval:
                    await self._sleep(seq, next_t - time.monotonic())
                seq.tokens += 1
                generated += 1
                self.counters["gen"] += 1
                kind, word = token
                out[kind].append(word if not out[kind] else " " + word)
                if stream and kind != "tool":
                    pending[kind] = pending.get(kind, "") + out[kind][-1]
                    if sent == 0 or generated - sent >= interval:
                        await flush()
            reply = "".join(out["content"])
            self.prefixes.store([*messages, {"role": "assistant", "content": reply}])
            usage = {"prompt_tokens": prompt, "completion_tokens": len(tokens)}
            usage |= {"total_tokens": prompt + len(tokens)}
            usage |= {"prompt_tokens_details": {"cached_tokens": hit}}
            call = None
            if plan["tool"]:
                fn = {"name": plan["tool"][0], "arguments": plan["tool"][1]}
                call = {"index": 0, "id": f"call_{base['id']}", "type": "function", "function": fn}
            if stream:
                if call:
                    await chunk({"tool_calls": [call]})
                await chunk({}, plan["finish"])
                if (body.get("stream_options") or {}).get("include_usage"):
                    await send(sse(base | {"choices": [], "usage": usage}))
                await send(part(b"data: [DONE]\n\n", more=False))
                return
            calls = [{k: v for k, v in call.items() if k != "index"}] if call else []
            message = {"role": "assistant", "content": None if call else reply, "tool_calls": calls}
            message[cfg.reasoning_field] = "".join(out[cfg.reasoning_field]) or None
            choice = {"index": 0, "message": message, "logprobs": None}
            choice["finish_reason"] = plan["finish"]
            obj = base | {"object": "chat.completion", "choices": [choice], "usage": usage}
            await send(start(JSON))
            await send(part(json.dumps(obj).encode(), more=False))
        finally:
            self.running.discard(seq)
            self.slots.release()

    async def _sleep(self, seq: Seq, seconds: float) -> None:
        """Sleep, but end the response at once when a newer request interrupts this one."""
        if seq.cut.is_set():
            raise Cut
        if seconds > 0:
            try:
                await asyncio.wait_for(seq.cut.wait(), seconds)
            except TimeoutError:
                return
            raise Cut

    def metrics(self) -> str:
        kv = min(1.0, sum(s.tokens for s in self.running) / self.cfg.kv_tokens)
        return metrics_text(self.cfg.model, self.slots, kv, self.counters)


def build_app(config: SimConfig | None = None) -> Starlette:
    engine = SimEngine(config or SimConfig())
    cfg = engine.cfg

    async def models(_: Request) -> Response:
        card = {"id": cfg.model, "object": "model", "created": int(time.time())}
        card |= {"owned_by": cfg.kind, "root": cfg.model, "parent": None}
        return JSONResponse(
            {"object": "list", "data": [card | {"max_model_len": cfg.max_model_len}]}
        )

    async def health(_: Request) -> Response:
        return Response(status_code=200)

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(engine.metrics(), media_type="text/plain; version=0.0.4")

    async def props(_: Request) -> Response:  # llama.cpp server reports its slots here
        return JSONResponse({"total_slots": engine.slots.n, "model_path": cfg.model})

    async def sim_requests(_: Request) -> Response:
        return JSONResponse(list(engine.requests))

    async def sim_reset(_: Request) -> Response:
        engine.reset()
        return JSONResponse({"ok": True})

    async def sim_release(_: Request) -> Response:
        engine.released.set()
        engine.holding = False
        return JSONResponse({"ok": True})

    async def sim_hold(_: Request) -> Response:
        engine.released = asyncio.Event()
        engine.holding = True
        return JSONResponse({"ok": True})

    routes = [
        Route("/v1/models", models),
        Route("/v1/chat/completions", engine, methods=["POST"]),  # an ASGI app, not a view
        Route("/metrics", metrics),
        Route("/health", health),
        Route("/sim/requests", sim_requests),
        Route("/sim/reset", sim_reset, methods=["POST"]),
        Route("/sim/release", sim_release, methods=["POST"]),
        Route("/sim/hold", sim_hold, methods=["POST"]),
    ]
    if cfg.kind == "llamacpp":
        routes.append(Route("/props", props))
    app = Starlette(routes=routes)
    app.state.engine = engine
    return app


class _Server(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and sockets:  # the test fixture waits for this exact line
            print(f"READY port={sockets[0].getsockname()[1]}", flush=True)


async def serve(args: argparse.Namespace, config: SimConfig) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    logging.getLogger("uvicorn.error").addFilter(QuietCuts())
    # A short graceful timeout: stalled streams would otherwise hold SIGTERM for an hour.
    app = build_app(config)
    uconf = uvicorn.Config(app, log_level=args.log_level, timeout_graceful_shutdown=1)
    await _Server(uconf).serve(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    args, config = parse_args(argv, __doc__)
    asyncio.run(serve(args, config))


if __name__ == "__main__":
    main()
