"""The command line sends the local secret and the message only to the app itself (issue 49,
item 4): it trusted the URL in `app.json`, whatever it named and whoever listened there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.app_client import (
    DISCOVERY_FILE,
    find_app,
    listens,
    loopback_address,
    process_start,
)
from tests.listening import Listener


@pytest.mark.parametrize(
    ("url", "address"),
    [("http://127.0.0.1:7860", ("127.0.0.1", 7860)), ("https://[::1]:8443/", ("::1", 8443)),
     ("http://127.0.0.5:1", ("127.0.0.5", 1)), ("http://localhost:7860", None),
     ("http://assistant.lan:7860", None), ("http://192.0.2.2:7860", None),
     ("http://user:pw@127.0.0.1:7860", None), ("http://127.0.0.1:7860/elsewhere", None),
     ("http://127.0.0.1:7860/?x=1", None), ("ftp://127.0.0.1:21", None),
     ("http://127.0.0.1", None), ("http://127.0.0.1:99999", None), ("nonsense", None)],
)  # fmt: skip
def test_only_a_loopback_address_with_a_port_is_taken(url, address):
    assert loopback_address(url) == address


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen]:
    """A live process of this user that is not listening anywhere (the app, say)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_listens_tells_whose_socket_it_is(other_process):
    here, anywhere = Listener(), Listener("0.0.0.0")
    try:
        assert listens(os.getpid(), "127.0.0.1", here.port) is True
        assert listens(os.getpid(), "127.0.0.1", anywhere.port) is True  # a wildcard bind
        assert listens(other_process.pid, "127.0.0.1", here.port) is False
        assert listens(os.getpid(), "127.0.0.2", here.port) is False
    finally:
        here.close()
        anywhere.close()
    assert listens(os.getpid(), "127.0.0.1", here.port) is False  # closed


def write_discovery(data: Path, url: str, pid: int) -> None:
    path = data / DISCOVERY_FILE
    path.write_text(json.dumps({"url": url, "pid": pid, "started": process_start(pid),
                                "secret": "the-local-secret"}))  # fmt: skip
    os.chmod(path, 0o600)


def test_nothing_is_sent_to_a_port_another_process_holds(tmp_path, other_process):
    # the announced app is alive but another program listens at the URL: it was handed the
    # secret (and then the message)
    thief = Listener()
    notes: list[str] = []
    try:
        write_discovery(tmp_path, f"http://127.0.0.1:{thief.port}", other_process.pid)
        assert find_app(tmp_path, note=notes.append) is None
    finally:
        thief.close()
    assert thief.got == b"", thief.got
    assert notes and "does not listen" in notes[0]


def test_nothing_is_sent_to_a_name_or_another_host(tmp_path):
    thief = Listener("0.0.0.0")
    notes: list[str] = []
    try:
        write_discovery(tmp_path, f"http://localhost:{thief.port}", os.getpid())
        assert find_app(tmp_path, note=notes.append) is None
    finally:
        thief.close()
    assert thief.got == b"", thief.got
    assert notes and "not this machine's loopback" in notes[0]
