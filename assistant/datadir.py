"""The data directory is its user's alone (issue 49, item 5).

The store holds every login's conversations: with a umask of 022 a new data directory was
0755 and `assistant.db` 0644, so any local user could read them. Whatever the umask, the
directory the app makes is 0700 and every file the app writes in it 0600 (SQLite gives its
-wal and -shm files the database's mode), and `assistant serve` and its worker run with a
umask of 077, so what they and the libraries they run write (Gradio's cache of uploads and
exports) is private too. A directory that already exists keeps its mode (it may be a folder
the operator shares on purpose): `assistant doctor` and `assistant serve` warn when other
users can read it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

DIR_MODE = 0o700
FILE_MODE = 0o600
UMASK = 0o077
"""The umask of the app's long-lived processes: what they create is their user's only."""


def make_private_dir(path: Path) -> Path:
    """`path`, made 0700 if it is missing (its missing parents as the umask says)."""
    if path.is_dir():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # another process made it first
        path.mkdir(mode=DIR_MODE)
        os.chmod(path, DIR_MODE)  # mkdir's mode passes through the umask
    return path


def make_private(path: Path) -> None:
    """An existing file of the app's becomes 0600 (one an older version left readable)."""
    with contextlib.suppress(OSError):
        if path.stat().st_uid == os.getuid() and path.stat().st_mode & 0o777 != FILE_MODE:
            os.chmod(path, FILE_MODE)


def touch_private(path: Path) -> None:
    """`path` exists and is 0600 (made empty if missing)."""
    os.close(_open(path, os.O_WRONLY | os.O_CREAT))


def open_private(path: Path, mode: str = "w") -> IO:
    """`open(path, mode)` for writing ("w", "a", "wb" or "ab"), the file 0600."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    return os.fdopen(_open(path, flags), mode)


def write_private(path: Path, data: str | bytes) -> None:
    with open_private(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def _open(path: Path, flags: int) -> int:
    fd = os.open(path, flags, FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o777 != FILE_MODE:
            os.fchmod(fd, FILE_MODE)  # it existed, or the umask took the owner's bits
    except OSError:
        os.close(fd)
        raise
    return fd


def exposure(path: Path) -> str | None:
    """Why other users can read (or enter) the directory `path`, or None: it is private, or
    a parent already keeps them out (as pytest's and systemd's private folders do)."""
    try:
        mode = path.stat().st_mode & 0o777
        parents = [p.stat().st_mode for p in path.resolve().parents]
    except OSError:
        return None
    # "others" need x on every parent; the group too (a check that ignores who is in it)
    for who, reach, through in (("other users", 0o005, 0o001), ("its group", 0o050, 0o010)):
        if mode & reach and all(p & through for p in parents):
            return (f"the data directory {path} is mode {mode:o}: {who} can read the "
                    f"conversations in it; chmod 700 {path}")  # fmt: skip
    return None
