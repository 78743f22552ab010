"""The data directory is its user's alone, whatever the umask (issue 49, item 5): with umask
022 a new data directory was 0755 and `assistant.db` 0644, readable by every local user."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.app_client import announce
from assistant.datadir import exposure, make_private_dir, open_private, write_private
from assistant.doctor import data_dir_check
from assistant.settings import load_settings
from assistant.store.db import Store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o000])
def test_a_new_store_and_its_directory_are_private_whatever_the_umask(tmp_path, mask):
    data = tmp_path / "new" / "data"
    with umask(mask):
        store = Store(data / "assistant.db")
        try:
            cid = store.new_conversation("alice", "secrets")
            store.rename_conversation(cid, "alice", "more secrets")
            files = {p.name: mode(p) for p in data.iterdir()}
        finally:
            store.close()
    assert mode(data) == 0o700
    # SQLite's write-ahead log and shared memory too, while the store is open
    assert {"assistant.db", "assistant.db-wal", "assistant.db-shm"} <= set(files), files
    assert set(files.values()) == {0o600}, files


def test_an_older_stores_readable_files_are_made_private(tmp_path):
    db = tmp_path / "assistant.db"
    with umask(0o022):
        old = sqlite3.connect(db)
        old.execute("PRAGMA journal_mode=WAL")
        old.execute("CREATE TABLE t (x)")
        old.commit()
        assert mode(db) == 0o644
        store = Store(db)  # while the older process still holds its -wal and -shm
        store.close()
        old.close()
    assert mode(db) == 0o600


def test_the_apps_other_files_are_private_whatever_the_umask(tmp_path):
    with umask(0o022):
        announce(tmp_path, "http://127.0.0.1:1", "s")
        write_private(tmp_path / "serve.pid", "1")
        with open_private(tmp_path / "engine.log", "ab") as log:
            log.write(b"a request\n")
        (tmp_path / "old.log").write_text("x")
        assert mode(tmp_path / "old.log") == 0o644
        with open_private(tmp_path / "old.log", "a") as log:  # an older version's log
            log.write("y")
    for name in ("app.json", "serve.pid", "engine.log", "old.log"):
        assert mode(tmp_path / name) == 0o600, name
    assert (tmp_path / "old.log").read_text() == "xy"


def test_the_self_signed_certificate_and_key_are_private(tmp_path):
    from assistant.web.edge.tls import server_certificate

    data = tmp_path / "data"
    with umask(0o022):
        made = server_certificate(None, None, True, data, "127.0.0.1")
    assert made is not None
    assert mode(made.cert.parent) == 0o700  # data/tls
    assert mode(made.cert) == 0o600 and mode(made.key) == 0o600


def test_an_existing_directory_keeps_its_mode(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    assert make_private_dir(shared) == shared and mode(shared) == 0o755


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A folder every user can pass through (under the system's temp folder)."""
    base = Path(tempfile.mkdtemp(prefix="assistant-datadir-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


def test_a_data_directory_others_can_read_is_found(reachable):
    data = reachable / "data"
    data.mkdir()
    os.chmod(data, 0o755)
    why = exposure(data)
    assert why and "other users" in why and f"chmod 700 {data}" in why
    os.chmod(data, 0o750)
    assert "its group" in (exposure(data) or "")
    os.chmod(data, 0o700)
    assert exposure(data) is None
    os.chmod(data, 0o755)
    os.chmod(reachable, 0o700)  # a parent that keeps everyone out is enough
    assert exposure(data) is None


def test_the_doctor_warns_about_a_data_directory_others_can_read(reachable):
    data = reachable / "data"
    data.mkdir()
    os.chmod(data, 0o755)
    settings = load_settings(env={"ASSISTANT_DATA_DIR": str(data)}, toml_path=data / "none")
    check = data_dir_check(settings)
    assert check.ok is False and "chmod 700" in check.detail
    os.chmod(data, 0o700)
    assert data_dir_check(settings).ok is True
