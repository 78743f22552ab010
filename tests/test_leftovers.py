"""Nothing the app starts outlives it (issue 48): its children end with it, however it ends, and
what a killed run left is ended at the next start. Real processes, killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from assistant.leftovers import Entry, Leftovers, alive, start_time
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent


def _parent(code: str, tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    """A Python process running `code`, which prints one pid per line, then "ok"; and those."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp_path)),
    )  # fmt: skip
    assert proc.stdout is not None
    pids = []
    while (line := proc.stdout.readline().strip()) != "ok":
        assert line, "the parent exited early"
        pids.append(int(line))
    return proc, pids


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def _gone(pids: dict[int, int]) -> bool:
    return not any(alive(pid, started) for pid, started in pids.items())


ON_A_LIFELINE = """
import subprocess, sys, threading, time
from assistant.lifeline import lifeline_fd, on_lifeline
server = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"]
procs = []
def start():
    procs.append(subprocess.Popen(on_lifeline(server), pass_fds=(lifeline_fd(),),
                                  start_new_session=True, stdout=subprocess.DEVNULL))
# started from a thread that ends at once, as the embedded engine's starters do
thread = threading.Thread(target=start)
thread.start()
thread.join()
print(procs[0].pid)
print("ok", flush=True)
time.sleep(300)
"""


def test_a_child_on_the_lifeline_ends_when_its_parent_is_killed(tmp_path):
    parent, (child,) = _parent(ON_A_LIFELINE, tmp_path)
    started = start_time(child)
    assert started is not None
    try:
        # the thread that started it has ended: the child lives on while the parent does
        assert b"http.server" in Path(f"/proc/{child}/cmdline").read_bytes()
        assert alive(child, started)
        _kill(parent)
        wait_until(lambda: _gone({child: started}), 5, "the child to end with its parent")
    finally:
        parent.kill()
        if alive(child, started):
            os.kill(child, signal.SIGKILL)


UNDER_A_BENCHMARK = """
import sys, time
from assistant.devtools.launcher import running
with running(["sleep", "300"]) as p:
    print(p.pid)
    print("ok", flush=True)
    time.sleep(300)
"""


def test_what_a_benchmark_started_ends_when_the_benchmark_is_killed(tmp_path):
    bench, (app,) = _parent(UNDER_A_BENCHMARK, tmp_path)
    started = start_time(app)
    assert started is not None
    try:
        _kill(bench)
        wait_until(lambda: _gone({app: started}), 5, "the benchmark's process to end with it")
    finally:
        if alive(app, started):
            os.kill(app, signal.SIGKILL)


LEAVES_THINGS = """
import subprocess, sys, time
from pathlib import Path
from assistant.leftovers import Leftovers
record = Leftovers(Path(sys.argv[1]) / "data")
# a child that does not end with it: what a lifeline cannot catch (a stuck process, say)
child = subprocess.Popen(["sleep", "300"], start_new_session=True)
record.add_process(child.pid, "engine")
record.scratch()
print(child.pid)
print("ok", flush=True)
time.sleep(300)
"""


def test_a_next_start_ends_what_a_killed_run_left_and_nothing_else(tmp_path):
    data = tmp_path / "data"
    app, (engine,) = _parent(LEAVES_THINGS, tmp_path)
    engine_started = start_time(engine)
    assert engine_started is not None
    (scratch,) = tmp_path.glob("assistant-*")
    # a live process the record names with another start time: the pid of one that ended,
    # since given to another program. Never ours to end
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    other_started = start_time(other.pid)
    assert other_started is not None
    record = Leftovers(data)
    record.add(Entry("proc", app.pid, start_time(app.pid) or 0, other.pid, other_started - 1))
    # a child of a run that is still going (this one): not a leftover
    mine = subprocess.Popen(["sleep", "300"], start_new_session=True)
    record.add_process(mine.pid, "engine")
    try:
        _kill(app)
        assert alive(engine, engine_started)  # nothing ended it: it is a leftover

        ended = Leftovers(data).end()

        assert _gone({engine: engine_started})
        assert not scratch.exists()
        assert len(ended) == 2 and f"engine (pid {engine})" in ended
        assert other.poll() is None and mine.poll() is None
        # the record keeps only what is still another run's
        kept = (data / "children").read_text().splitlines()
        assert len(kept) == 1 and f"\t{mine.pid}\t" in kept[0]
        assert Leftovers(data).end() == []
    finally:
        for proc in (other, mine):
            proc.kill()
            proc.wait()
        if alive(engine, engine_started):
            os.kill(engine, signal.SIGKILL)


def test_a_scratch_directory_is_removed_when_its_run_stops(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    record = Leftovers(tmp_path / "data")
    scratch = record.scratch()
    (scratch / "export.md").write_text("x")
    assert Leftovers(tmp_path / "data").end() == []  # its run (this process) is alive
    record.remove(scratch)
    assert list(tmp_path.glob("assistant-*")) == []
    assert (tmp_path / "data" / "children").read_text() == ""
