"""`assistant serve` on the embedded engine, killed with SIGKILL (issue 48): nothing it started
lives on, nothing of it is left in the temp directory, and it starts again on the same data
directory, ending first what an earlier run left."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from assistant.leftovers import Entry, Leftovers, alive, start_time
from tests.app_proc import CLI_SERVE, run_app
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(1500)  # two starts of two engine processes on a busy machine


def descendants(root: int) -> dict[int, int]:
    """Every process below `root`, by pid, with its start time."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and (started := start_time(pid)) is not None:
                found[pid] = started
                todo.append(pid)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_killed_app_leaves_nothing_and_starts_again(tmp_path):
    data, temp = tmp_path / "app", tmp_path / "temp"
    temp.mkdir()
    serve = {"entry": CLI_SERVE, "TMPDIR": str(temp)}  # its temp files, where we can see them
    with run_app(data, "", **serve) as app:
        engines_and_worker = wait_until(
            lambda: (
                (kids := descendants(app.proc.pid))
                and sum("llama_cpp.server" in cmdline(p) for p in kids) == 2
                and any("worker" in cmdline(p) for p in kids)
                and kids
            ),
            120,
            "both lanes' engines and the job worker to run",
        )
        (first_scratch,) = temp.glob("assistant-*")
        app_started = start_time(app.proc.pid)
        assert app_started is not None
        os.kill(app.proc.pid, signal.SIGKILL)
        app.proc.wait()
        wait_until(
            lambda: not any(alive(p, s) for p, s in engines_and_worker.items()),
            5,
            "the engines and the worker to end with the app",
        )
    # what no lifeline could end (a stuck process), recorded as the killed app's
    planted = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        planted_started = start_time(planted.pid)
        assert planted_started is not None
        Leftovers(data).add(Entry("proc", app.proc.pid, app_started, planted.pid, planted_started,
                                  "engine"))  # fmt: skip

        with run_app(data, "", **serve) as again:
            assert planted.poll() is not None  # ended before the app started its own
            assert not first_scratch.exists()  # the killed run's temp files are gone
            r = httpx.post(
                again.url + "v1/chat/completions",
                json={"model": "assistant", "messages": [{"role": "user", "content": "Hello!"}]},
                timeout=600,
            )
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["message"]["content"].strip()
            children = descendants(again.proc.pid)
            assert children
        # a clean stop leaves nothing either
        assert not any(alive(p, s) for p, s in children.items())
        assert list(temp.iterdir()) == []
    finally:
        planted.kill()
        planted.wait()
