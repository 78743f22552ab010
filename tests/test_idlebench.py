"""`assistant bench idle`: its CPU readings and summaries (speed is measured by the bench,
never asserted here)."""

from __future__ import annotations

import os
import subprocess
import sys

from assistant.devtools import idlebench


def test_windows_read_each_process_per_second() -> None:
    # a spinner and a sleeper, both ready before the windows open; not this process, whose
    # threads (left by earlier tests) may be busy on their own
    spin = "print('ready', flush=True)\nwhile True: pass"
    rest = "import time; print('ready', flush=True); time.sleep(60)"
    procs = {
        name: subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for name, code in (("busy", spin), ("idle", rest))
    }
    try:
        for p in procs.values():
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        out = idlebench.windows({name: [p.pid] for name, p in procs.items()}, 2, 0.5)
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
    assert len(out["busy"]) == len(out["idle"]) == 2
    assert all(v >= 0 for v in out["idle"])
    assert min(out["busy"]) > max(out["idle"])  # a spinning process reads as busy, each window


def test_children_finds_a_child_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in idlebench.children(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_the_apps_children_are_told_apart_by_what_they_run() -> None:
    """The job worker's CPU counts as the app's; the engines' (one per lane when the lanes run
    apart) are read apart, all of them: one name per kind kept only the last engine found."""
    sleep = "import time; time.sleep(30)"
    worker = subprocess.Popen([sys.executable, "-c", sleep, "-m", "assistant.cli", "worker"])
    engines = [
        subprocess.Popen([sys.executable, "-c", sleep, "-m", "llama_cpp.server"]) for _ in range(2)
    ]
    try:
        named = idlebench.named_children(os.getpid())
        # (other children this test run started may be among the engines: never the worker)
        assert named["worker"] == [worker.pid]
        assert {e.pid for e in engines} <= set(named["engine"])
        assert worker.pid not in named["engine"]
        assert idlebench.group_cpu_ms([e.pid for e in engines] + [worker.pid]) >= 0
    finally:
        for p in (worker, *engines):
            p.kill()
            p.wait()


def test_summaries_carry_their_n() -> None:
    assert idlebench.summarize([3.0, 1.0, 2.0]) == {"n": 3, "p50": 2.0, "max": 3.0, "mean": 2.0}
    assert idlebench.summarize([])["n"] == 0
