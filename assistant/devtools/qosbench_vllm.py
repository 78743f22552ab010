"""`assistant bench qos --vllm`: the lanes on vLLM's real scheduler.

Two real `vllm serve` processes on the tiny scripted model (`assistant.devtools.vllm_server`),
each with few sequences (`--max-num-seqs 4`), one with FCFS (vLLM's default) and one with
`--scheduling-policy priority`. On each: chat time to first token idle, and with delegated jobs
saturating the deep lane, with the app's lane scheduler on (deep requests capped below the
engine's sequences, chat admitted first) and off (every job at the engine at once, so vLLM's
own queue decides). The deep jobs are the scripted model's thinking answers (about 410 tokens).
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from assistant.devtools.qosbench import _qos_on
from assistant.devtools.vllm_server import FLAGS, run_vllm
from assistant.settings import Settings

MAX_NUM_SEQS = 4
DEEP_JOBS = 40
"""Enough that, with the scheduler off, a queue forms at the engine behind its 4 sequences, and
that deep work runs through every one of 24 chat samples (16 ran out before the last ones)."""


def bench_qos_vllm(settings: Settings, rounds: int | None) -> dict:
    rounds = rounds or 24  # a p95 of fewer samples is decided by one or two of them
    out: dict[str, Any] = {"bench": "qos", "engine": "vllm", "rounds": rounds}
    out["max_num_seqs"] = MAX_NUM_SEQS
    with tempfile.TemporaryDirectory(prefix="assistant-vllm-") as scratch:
        for policy in ("fcfs", "priority"):
            flags = FLAGS["plain" if policy == "fcfs" else "priority"]
            with run_vllm(Path(scratch) / policy, flags, max_num_seqs=MAX_NUM_SEQS) as server:
                s = replace(
                    settings,
                    engine_url=server.url,
                    engine_kind="vllm",
                    model="tiny",
                    # the app's own cap: one sequence always free for chat
                    deep_max_in_flight=MAX_NUM_SEQS - 1,
                )
                label = f"vLLM {policy}, --max-num-seqs {MAX_NUM_SEQS}"
                out[f"vllm_{policy}"] = _qos_on(s, label, rounds, 0.3, DEEP_JOBS)
    return out
