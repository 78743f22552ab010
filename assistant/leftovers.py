"""What the app on a data directory started, recorded there, so a next start ends what a killed
one left (issue 48).

`children` in the data directory lists each process the app started (the embedded engine's,
the job worker) and its scratch directory in the system's temp directory, each with its owner:
the app's process. A process is named by its pid *and* its start time (from /proc/PID/stat), so
a pid the system has since given to another program is never taken for ours. `end()` ends what
an owner that is gone left, and nothing of an owner still running (the command line's own
engine beside a running app, say).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FILE = "children"
SCRATCH_PREFIX = "assistant-"
END_GRACE_S = 3.0
"""How long a leftover process gets after SIGTERM before SIGKILL."""


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), or None if it is gone (or a
    zombie: it will never run again). Linux; None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name, in parentheses, may hold spaces
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def alive(pid: int, started: int) -> bool:
    """Whether process `pid` is the one that started at `started`, and still running."""
    return pid > 0 and start_time(pid) == started


@dataclass(frozen=True)
class Entry:
    """One line: what (a process, or a scratch directory) and whose."""

    kind: str
    """"proc" or "dir"."""
    owner: int
    owner_started: int
    pid: int = 0
    started: int = 0
    what: str = ""
    """A process's label, or the directory's path."""

    def line(self) -> str:
        fields = (self.kind, self.owner, self.owner_started, self.pid, self.started, self.what)
        return "\t".join(str(f) for f in fields) + "\n"

    @staticmethod
    def parse(line: str) -> Entry | None:
        try:
            kind, owner, owner_started, pid, started, what = line.rstrip("\n").split("\t", 5)
            return Entry(kind, int(owner), int(owner_started), int(pid), int(started), what)
        except ValueError:
            return None

    def orphaned(self) -> bool:
        return not alive(self.owner, self.owner_started)


class Leftovers:
    """The record of one data directory's processes and scratch directories."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / FILE

    def _me(self) -> tuple[int, int]:
        pid = os.getpid()
        return pid, start_time(pid) or 0

    @contextlib.contextmanager
    def _entries(self) -> Iterator[list[Entry]]:
        """The entries, under a lock; what the block leaves in the list is written back."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # the app, its command line and a next start share it
            f.seek(0)
            entries = [e for e in map(Entry.parse, f) if e is not None]
            yield entries
            f.seek(0)
            f.truncate()
            f.writelines(e.line() for e in entries)

    def _change(self, change: Callable[[list[Entry]], list[Entry]]) -> None:
        with contextlib.suppress(OSError), self._entries() as entries:
            entries[:] = change(entries)

    def add(self, entry: Entry) -> None:
        self._change(lambda entries: [*entries, entry])

    def add_process(self, pid: int, label: str) -> None:
        """Record a child this process started."""
        started = start_time(pid)
        if started is not None:
            self.add(Entry("proc", *self._me(), pid, started, label))

    def forget_process(self, pid: int) -> None:
        """A child that was stopped (or reaped) is no longer to be ended."""
        me = self._me()
        self._change(lambda es: [e for e in es if (e.pid, e.owner, e.owner_started) != (pid, *me)])

    def scratch(self) -> Path:
        """A new private temp directory for this process, recorded: removed by `remove` when
        it stops, or by the next start's `end()` if it was killed."""
        path = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
        self.add(Entry("dir", *self._me(), what=str(path)))
        return path

    def remove(self, scratch: Path) -> None:
        _remove_dir(scratch)
        self._change(lambda es: [e for e in es if (e.kind, e.what) != ("dir", str(scratch))])

    def end(self) -> list[str]:
        """End every process and remove every scratch directory whose owner is gone; what was
        ended, for the log."""
        ended: list[str] = []
        try:
            with self._entries() as entries:
                for e in entries:
                    if not e.orphaned():
                        continue
                    if e.kind == "proc" and alive(e.pid, e.started):
                        _end(e.pid, e.started)
                        ended.append(f"{e.what} (pid {e.pid})")
                    elif e.kind == "dir" and _remove_dir(Path(e.what)):
                        ended.append(e.what)
                entries[:] = [e for e in entries if not e.orphaned()]
        except OSError as e:
            log.warning("could not read or clear %s: %s", self.path, e)
        for what in ended:
            log.warning("ended what an earlier run left: %s", what)
        return ended


def _end(pid: int, started: int) -> None:
    """SIGTERM the process (its group, when it leads one), SIGKILL it after a grace time; every
    signal only after checking it is still the same process."""
    for sig, wait_s in ((signal.SIGTERM, END_GRACE_S), (signal.SIGKILL, 5.0)):
        if not alive(pid, started):
            return
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while alive(pid, started) and time.monotonic() < deadline:
            time.sleep(0.05)


def _remove_dir(path: Path) -> bool:
    """Remove one of our scratch directories: only a real directory of ours, by its name."""
    try:
        st = path.lstat()
    except OSError:
        return False
    if not path.name.startswith(SCRATCH_PREFIX) or st.st_uid != os.getuid():
        return False
    if path.is_symlink() or not path.is_dir():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True
