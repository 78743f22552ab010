"""The app's children end with it, however it ends (issue 48).

A child the app starts holds the read end of a pipe whose only write end the app keeps open for
its whole life. The kernel closes that end when the app's process ends, a `kill -9` and an OOM
kill too, and the child, reading end of file, kills its own process group at once.

A pipe rather than Linux's PR_SET_PDEATHSIG alone: the death signal follows the *thread* that
started the child, and the embedded engine is started (and restarted) from threads that end long
before the app does. `die_with_parent` (the death signal) is for a child started by a thread
that waits for it, as the launcher's and the vLLM helper's are.

The child side runs a Python module under the lifeline, in the same process:
`python -m assistant.lifeline FD MODULE ARGS...`.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import sys
import threading

_lock = threading.Lock()
_pipes: dict[int, tuple[int, int]] = {}
"""By process id: (read end, write end), made once; the write end is never closed."""


def lifeline_fd() -> int:
    """The read end a child inherits (pass it in `pass_fds`); made once per process.

    Both ends are close-on-exec: a child gets the read end only where it is passed, and never
    the write end, which would keep its own lifeline open."""
    with _lock:
        pipe = _pipes.get(os.getpid())
        if pipe is None:
            pipe = _pipes[os.getpid()] = os.pipe()
        return pipe[0]


def on_lifeline(cmd: list[str]) -> list[str]:
    """`cmd`, a `python -m MODULE ARGS...`, as a child that ends with this process; started
    with `pass_fds=(lifeline_fd(),)`."""
    python, flag, module, *args = cmd
    if flag != "-m":
        raise ValueError(f"not a python -m command: {cmd}")
    return [python, "-m", "assistant.lifeline", str(lifeline_fd()), module, *args]


def _libc_prctl():
    with contextlib.suppress(OSError, AttributeError, ImportError):
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    return None


_prctl = _libc_prctl()
"""Looked up in the parent: after a fork, only async-signal-safe work is safe in the child."""
PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM):
    """A `preexec_fn` that has the child sent `sig` when the thread that starts it ends (with
    its process: a killed test run or benchmark). Linux only; elsewhere it does nothing."""
    parent = os.getpid()

    def arm() -> None:
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


def _watch(fd: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(fd, 1):
            pass
    # the app is gone: so is all this process started (the engine leads a group of its own)
    with contextlib.suppress(OSError):
        if os.getpgid(0) == os.getpid():
            os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> None:
    """`FD MODULE ARGS...`: watch FD, then run MODULE as `__main__` with ARGS."""
    fd, module, *args = argv
    threading.Thread(target=_watch, args=(int(fd),), name="lifeline", daemon=True).start()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
