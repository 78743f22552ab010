"""`assistant bench qos --vllm --deep-caps 1,2,3`: what the deep lane's cap costs and buys.

vLLM does not preempt a running sequence for a waiting one at `--max-num-seqs` (only when its
KV memory runs out), so the app keeps deep requests below the engine's sequences and one stays
free for chat. This sweep prices that: on one `vllm serve --max-num-seqs 4` per policy (the
tiny scripted model, on cores of its own as in `bench qos --vllm`), chat's time to first token
idle, then beside `SWEEP_JOBS` delegated jobs with the lanes off (every job at the engine at
once: vLLM's own queue decides, and deep work has every sequence) and with the app's deep cap
at each of `caps`. Each row gives the deep work's throughput (jobs and tokens a second, from
its first request at the engine to its last job done) against the lanes-off row's, and chat's
p95 and p99 beside it.

Every run is bounded: the engine's start (`START_BOUND_S`, a clear error row when it fails,
and the next policy goes on), each row (`ROW_BOUND_S`: a row that runs out says so, with what
it measured), and the whole table (`TABLE_BOUND_S`: rows that would not fit are skipped and
said). Each row is written as it finishes (`emit`: a JSON line), so a stopped run keeps them.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from assistant.devtools.cpus import Placement, format_cpu_list, pinned, placement, tree_cpus
from assistant.devtools.qosbench import _chat_ttft, _measure, _saturated
from assistant.devtools.qosbench_vllm import MAX_NUM_SEQS
from assistant.devtools.vllm_server import FLAGS, VllmStartFailed, run_vllm
from assistant.errors import BadInput
from assistant.settings import Settings

SWEEP_JOBS = 12
"""Divisible by every cap up to 4, so no row ends on a part-filled wave; with a cap of 1 they
still run all through the chat samples."""
ROUNDS = 12
"""Chat samples per row: its p99 is the worst of 12, said beside it (n)."""
GAP_S = 0.3
START_BOUND_S = 240.0
ROW_BOUND_S = 240.0
"""A row (the worker's start, the deep work, the chat samples) ends within this: at
`ROW_BOUND_S - ROW_MARGIN_S` its work is stopped, and stopping takes the rest."""
ROW_MARGIN_S = 20.0
TABLE_BOUND_S = 25 * 60.0
POLICIES = ("fcfs", "priority")

Emit = Callable[[dict[str, Any]], None]


def parse_caps(text: str) -> list[int]:
    try:
        caps = [int(c) for c in text.split(",") if c.strip()]
    except ValueError as e:
        raise BadInput(f"--deep-caps: whole numbers separated by commas, not {text!r}") from e
    if not caps or any(c < 1 or c > MAX_NUM_SEQS for c in caps):
        raise BadInput(f"--deep-caps: each from 1 to {MAX_NUM_SEQS} (the engine's sequences)")
    return caps


def bench_qos_caps(
    settings: Settings,
    rounds: int | None,
    engine_cpus: str | None,
    caps: list[int],
    policies: tuple[str, ...] = POLICIES,
    emit: Emit = lambda row: None,
) -> dict[str, Any]:
    rounds = rounds or ROUNDS
    try:
        where = placement(engine_cpus, frozenset(os.sched_getaffinity(0)))
    except ValueError as e:
        raise BadInput(str(e)) from e
    out: dict[str, Any] = {
        "bench": "qos-caps",
        "engine": "vllm",
        "max_num_seqs": MAX_NUM_SEQS,
        "deep_jobs": SWEEP_JOBS,
        "rounds": rounds,
        "caps": caps,
        "bounds_s": {"start": START_BOUND_S, "row": ROW_BOUND_S, "table": TABLE_BOUND_S},
        "cpus": {
            "placement": where.why,
            "engine": format_cpu_list(where.engine) if where.engine else "shared",
            "bench_app_worker": format_cpu_list(where.rest) if where.rest else "shared",
        },
    }
    deadline = time.monotonic() + TABLE_BOUND_S
    rows: list[dict[str, Any]] = []

    def keep(row: dict[str, Any]) -> None:
        rows.append(row)
        emit(row)

    with pinned(where.rest), tempfile.TemporaryDirectory(prefix="assistant-vllm-") as scratch:
        for policy in policies:
            _policy(settings, policy, Path(scratch) / policy, rounds, where, caps, deadline, keep)
    out["rows"] = rows
    out["summary"] = [row_line(r) for r in rows]
    out["seconds"] = round(TABLE_BOUND_S - (deadline - time.monotonic()), 1)
    return out


def _policy(
    settings: Settings,
    policy: str,
    scratch: Path,
    rounds: int,
    where: Placement,
    caps: list[int],
    deadline: float,
    keep: Emit,
) -> None:
    from assistant.runtime import Runtime

    flags = FLAGS["plain" if policy == "fcfs" else "priority"]
    began = time.monotonic()
    bound = min(START_BOUND_S, deadline - began - ROW_BOUND_S)
    if bound < 60:
        keep(_row(policy, "engine start") | {"skipped": "it would not fit the table's bound"})
        return
    try:
        with run_vllm(
            scratch, flags, max_num_seqs=MAX_NUM_SEQS, cpus=where.engine, start_timeout_s=bound
        ) as server:
            # where vLLM's processes really run, from the kernel
            cpus = sorted({str(p["cpus"]) for p in tree_cpus(server.proc.pid)})
            start = {"engine_start_s": round(time.monotonic() - began, 1), "engine_cpus": cpus}
            s = replace(
                settings,
                engine_url=server.url,
                engine_kind="vllm",
                model="tiny",
                deep_max_in_flight=max(caps),
                data_dir=scratch / "data",
                max_jobs_per_user=10_000,
            )
            with Runtime(s) as rt:
                asyncio.run(_rows(rt, policy, rounds, caps, deadline, start, keep))
    except VllmStartFailed as e:
        # nothing waits on an engine that did not start: the row says why, the next goes on
        keep({"policy": policy, "row": "engine start", "error": str(e),
              "seconds": round(time.monotonic() - began, 1)})  # fmt: skip


async def _rows(
    rt: Any,
    policy: str,
    rounds: int,
    caps: list[int],
    deadline: float,
    start: dict[str, Any],
    keep: Emit,
) -> None:
    sampling = asyncio.create_task(rt.loop_lag.run())
    try:
        began = time.monotonic()
        await _chat_ttft(rt, "Hello!", None)  # a fresh engine's first prefill is start-up
        idle = (await _measure(rt, rounds, GAP_S)).summary()
        seconds = round(time.monotonic() - began, 1)
        keep(_row(policy, "idle") | _chat(idle) | start | {"seconds": seconds})
        base: dict[str, Any] | None = None
        for cap in [None, *caps]:
            name = "lanes off" if cap is None else f"cap {cap}"
            began = time.monotonic()
            if deadline - began < ROW_BOUND_S:
                keep(_row(policy, name) | {"skipped": "it would not fit the table's bound"})
                continue
            row = _row(policy, name) | await _bounded(rt, rounds, cap)
            row["seconds"] = round(time.monotonic() - began, 1)
            if cap is None:
                base = row
            elif base is not None and base.get("tokens_per_s") and "tokens_per_s" in row:
                ratio = row["tokens_per_s"] / base["tokens_per_s"]
                row["throughput_vs_lanes_off"] = round(ratio, 2)
            keep(row)
    finally:
        sampling.cancel()
        await asyncio.gather(sampling, return_exceptions=True)


async def _bounded(rt: Any, rounds: int, cap: int | None) -> dict[str, Any]:
    """One saturated condition within `ROW_BOUND_S`; what it measured, or that it ran out."""
    before = {j.id for j in rt.store.jobs("bench")}
    began = time.monotonic()
    try:
        async with asyncio.timeout(ROW_BOUND_S - ROW_MARGIN_S):
            samples, extra = await _saturated(
                rt, rounds, GAP_S, SWEEP_JOBS, "process", cap is not None, deep_max=cap
            )
    except TimeoutError:
        jobs = [j for j in rt.store.jobs("bench") if j.id not in before]
        for j in jobs:
            if j.state in ("queued", "running"):
                rt.jobs.cancel(j.id)
        return {
            "timed_out": True,
            "jobs_done": sum(j.state == "done" for j in jobs),
            "deep_tokens": sum(j.reasoning_tokens + j.answer_tokens for j in jobs),
            "after_s": round(time.monotonic() - began, 1),
        }
    run_s = max(extra["deep_run_s"], 1e-3)
    done = sum(j.state == "done" for j in rt.store.jobs("bench") if j.id not in before)
    return _chat(samples.summary()) | {
        "deep_states": extra["deep_states"],
        "deep_errors": extra["deep_errors"],
        "jobs": SWEEP_JOBS,
        "jobs_done": done,
        "jobs_per_s": round(done / run_s, 3),
        "tokens_per_s": round(extra["deep_tokens"] / run_s, 1),
        "deep_tokens": extra["deep_tokens"],
        "deep_run_s": extra["deep_run_s"],
        "samples_with_deep_running": extra["samples_with_deep_running"],
        "loop_lag_max_ms": extra["loop_lag"].get("max_ms"),
    }


def _row(policy: str, name: str) -> dict[str, Any]:
    return {"policy": policy, "row": name, "started_unix": round(time.time(), 1)}


def _chat(c: dict[str, Any]) -> dict[str, Any]:
    return {
        "chat_n": c["n"],
        "chat_no_token": c["no_token"],
        "chat_not_chat_lane": c["not_chat_lane"],
        "chat_p50_ms": c["p50_ms"],
        "chat_p95_ms": c["p95_ms"],
        "chat_p99_ms": c["p99_ms"],
    }


def row_line(r: dict[str, Any]) -> str:
    """One row in words, for the printed summary and the log."""
    head = f"{r['policy']:<8} {r['row']:<10}"
    if "error" in r:
        return f"{head} engine did not start ({r['seconds']} s): {r['error'].splitlines()[0]}"
    if "skipped" in r:
        return f"{head} skipped: {r['skipped']}"
    if r.get("timed_out"):
        return f"{head} ran out at {r['after_s']} s: {r['jobs_done']} jobs done"
    line = f"{head} chat p95 {r['chat_p95_ms']} ms, p99 {r['chat_p99_ms']} ms (n={r['chat_n']})"
    if "tokens_per_s" in r:
        line += (
            f"; deep {r['jobs_per_s']} jobs/s, {r['tokens_per_s']} tokens/s"
            f" ({r.get('throughput_vs_lanes_off', 1.0)} x lanes off)"
            f"; deep running in {r['samples_with_deep_running']}/{r['chat_n']} samples"
        )
    return line + f"; {r.get('seconds', '-')} s"
