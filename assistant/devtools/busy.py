"""`--busy`: another program taking a core beside a benchmark, as on a user's machine that is
doing something else (a build, a video call, a browser tab spinning)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from assistant.devtools.launcher import stop
from assistant.devtools.loadclient import cpu_ms

SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def busy_core(on: bool = True) -> Iterator[dict[str, Any]]:
    """While the block runs, a process spinning on one core (none when `on` is false). The
    dict it yields is filled at the end: the spinner's share of a core over the block, so a
    report shows the machine really was busy."""
    report: dict[str, Any] = {"busy": on}
    if not on:
        yield report
        return
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    began = time.monotonic()
    try:
        yield report
    finally:
        with contextlib.suppress(OSError):
            used_s = cpu_ms(spinner.pid) / 1000
            report["spinner_core_share"] = round(used_s / max(1e-3, time.monotonic() - began), 2)
        stop(spinner, grace_s=2)
