"""`assistant bench idle`: its CPU readings and summaries (speed is measured by the bench,
never asserted here)."""

from __future__ import annotations

import os
import subprocess
import sys

from assistant.devtools import idlebench


def test_windows_read_each_process_per_second() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        out = idlebench.windows({"me": os.getpid(), "busy": busy.pid}, 2, 0.3)
    finally:
        busy.kill()
        busy.wait()
    assert len(out["me"]) == len(out["busy"]) == 2
    assert all(v >= 0 for v in out["me"])
    assert max(out["busy"]) > max(out["me"])  # a spinning process reads as busy


def test_children_finds_a_child_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in idlebench.children(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_summaries_carry_their_n() -> None:
    assert idlebench.summarize([3.0, 1.0, 2.0]) == {"n": 3, "p50": 2.0, "max": 3.0, "mean": 2.0}
    assert idlebench.summarize([])["n"] == 0
