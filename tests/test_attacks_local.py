"""Attacks from this machine's other users and programs (issue 49, items 4 and 5), on the
running app (`assistant serve`, two logins) and the real command line. Each failed on the
code before the fix.

4. Five wrong `X-Assistant-Local` headers from loopback, and the right secret got 429 for a
   minute (twenty, and every login from loopback did); the command line sent the secret and
   the message to whatever URL `app.json` named, and printed a reply's escape codes raw.
5. With umask 022 a new data directory was 0755 and `assistant.db` 0644: every local user
   could read every conversation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from assistant.app_client import DISCOVERY_FILE, SECRET_HEADER, process_start
from assistant.devtools.launcher import running
from assistant.engine.embedded import free_port
from tests.app_proc import CLI_SERVE, App, app_env
from tests.listening import Listener
from tests.page_session import PageSession
from tests.simengine_proc import run_simengine
from tests.test_datadir import mode, umask
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent
USERS = {"ann": "pw-ann-49l", "bob": "pw-bob-49l"}
AUTH = ",".join(f"{u}:{p}" for u, p in USERS.items())
TITLE, CLEAR = "\x1b]0;pwned\x07", "\x1b[2J"


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with run_simengine("--token-ms", "2") as url:
        yield url


@pytest.fixture(scope="module")
def fresh(sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """The app on a data directory it makes itself, started under umask 022 (the usual one),
    with two logins and Gradio's cache in a folder of its own."""
    root = tmp_path_factory.mktemp("local")
    data, port = root / "new" / "data", free_port()
    env = app_env(data, sim, ASSISTANT_AUTH=AUTH, GRADIO_TEMP_DIR=str(root / "gradio"))
    with umask(0o022), running(
        [sys.executable, *CLI_SERVE, "--port", str(port)], url=f"http://127.0.0.1:{port}/",
        timeout_s=180, env=env, cwd=root, log=root / "app.log", grace_s=20,
    ) as p:  # fmt: skip
        app = App(p.url, p.proc, data, root / "app.log")
        wait_until((data / DISCOVERY_FILE).exists, 30, "the app's discovery file")
        yield app


def secret_of(app: App) -> str:
    return json.loads((app.data_dir / DISCOVERY_FILE).read_text())["secret"]


def cli(data_dir: Path, *args: str, engine: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.update(ASSISTANT_DATA_DIR=str(data_dir), ASSISTANT_ENGINE_URL=engine,
               PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")  # fmt: skip
    return subprocess.run([sys.executable, "-m", "assistant.cli", *args], env=env, cwd=data_dir,
                          capture_output=True, timeout=180)  # fmt: skip


# --- 4. the command line's secret, its discovery file, its output -------------------------


def test_wrong_local_secrets_cannot_lock_out_the_right_one_or_the_logins(fresh, sim):
    models = fresh.url + "v1/models"
    for n in range(25):  # past both the per-user (5) and the per-address (20) counts
        wrong = httpx.get(models, headers={SECRET_HEADER: f"guess-{n}"}, timeout=10)
        assert wrong.status_code == 401, (n, wrong.status_code, wrong.text)
    right = httpx.get(models, headers={SECRET_HEADER: secret_of(fresh)}, timeout=10)
    assert right.status_code == 200, right.text  # was 429 for a minute
    login = httpx.get(models, headers={"Authorization": f"Bearer ann:{USERS['ann']}"},
                      timeout=10)  # fmt: skip
    assert login.status_code == 200, login.text  # was 429: loopback's logins locked too
    # and the command line still goes through the app, not around it
    ran = cli(fresh.data_dir, "chat", "--new", "hello after the guesses", engine=sim)
    assert ran.returncode == 0, ran.stderr
    assert f"through the app at {fresh.url.rstrip('/')}" in ran.stderr.decode()


@pytest.fixture
def not_the_app() -> Iterator[subprocess.Popen]:
    """A live process of this user that listens nowhere."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("where", ["another process's port", "a name", "another address"])
def test_the_command_line_sends_nothing_to_a_url_that_is_not_the_apps(
    sim, tmp_path, not_the_app, where
):
    thief = Listener("0.0.0.0")
    host = {"a name": "localhost", "another address": "0.0.0.0"}.get(where, "127.0.0.1")
    record = {"url": f"http://{host}:{thief.port}", "pid": not_the_app.pid,
              "started": process_start(not_the_app.pid), "secret": "the-local-secret"}  # fmt: skip
    if where != "another process's port":
        record.update(pid=os.getpid(), started=process_start(os.getpid()))  # the thief's own
    (tmp_path / DISCOVERY_FILE).write_text(json.dumps(record))
    os.chmod(tmp_path / DISCOVERY_FILE, 0o600)
    try:
        ran = cli(tmp_path, "chat", "--json", "my private words", engine=sim)
    finally:
        thief.close()
    assert thief.got == b"", thief.got[:300]  # had the secret, then the message
    assert ran.returncode == 0, ran.stderr  # the turn ran in the command line itself
    assert json.loads(ran.stdout)["reply"].startswith("You said")


def check_shown_not_obeyed(
    plain: subprocess.CompletedProcess, as_json: subprocess.CompletedProcess
) -> None:
    assert plain.returncode == 0 and as_json.returncode == 0, (plain.stderr, as_json.stderr)
    for out in (plain.stdout, plain.stderr, as_json.stdout):
        assert b"\x1b" not in out and b"\x07" not in out, out[:300]
    assert b"\\x1b]0;pwned\\x07\\x1b[2J" in plain.stdout, plain.stdout[:300]
    # --json stays exact: the reply's text, escape codes and all
    assert f"{TITLE}{CLEAR}" in json.loads(as_json.stdout)["reply"]


def test_a_replys_escape_codes_are_shown_not_obeyed_through_the_app(fresh, sim):
    said = f"hello {TITLE}{CLEAR}there"
    plain = cli(fresh.data_dir, "chat", "--new", said, engine=sim)
    assert f"through the app at {fresh.url.rstrip('/')}" in plain.stderr.decode()
    check_shown_not_obeyed(plain, cli(fresh.data_dir, "chat", "--json", said, engine=sim))


def test_a_replys_escape_codes_are_shown_not_obeyed_in_process(sim, tmp_path):
    said = f"hello {TITLE}{CLEAR}there"
    plain = cli(tmp_path, "chat", said, engine=sim)
    check_shown_not_obeyed(plain, cli(tmp_path, "chat", "--json", said, engine=sim))


# --- 5. the data directory is its user's alone ------------------------------------------


def test_the_data_directory_and_every_file_the_app_wrote_are_private(fresh, tmp_path):
    # a turn (the store writes), an upload and a conversation's export (Gradio's cache)
    page = PageSession(fresh.url, auth=("ann", USERS["ann"]))
    try:
        bearer = {"Authorization": f"Bearer ann:{USERS['ann']}"}
        turn = {"model": "assistant", "messages": [{"role": "user", "content": "a secret"}]}
        r = httpx.post(fresh.url + "v1/chat/completions", json=turn, headers=bearer, timeout=60)
        assert r.status_code == 200, r.text
        cid = r.headers["x-assistant-conversation"]
        page.upload(b"RIFF....WAVE", "clip.wav")
        assert page.call("reopen_1", None).ok  # the page's load: its list of conversations
        opened = page.call("open", cid, None)
        assert opened.ok, opened.error
        exported = page.call("export", None)  # made when asked (issue 49, item 6)
        assert exported.ok, exported.error
    finally:
        page.close()
    data = fresh.data_dir
    assert mode(data) == 0o700, oct(mode(data))
    for name in ("assistant.db", "assistant.db-wal", "assistant.db-shm", DISCOVERY_FILE,
                 "serve.pid"):  # fmt: skip
        assert mode(data / name) == 0o600, (name, oct(mode(data / name)))
    cache = data.parent.parent / "gradio"
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert any(p.name == "clip.wav" for p in files) and any(p.suffix == ".md" for p in files)
    shown = {str(p.relative_to(cache)): oct(mode(p)) for p in cache.rglob("*")}
    assert mode(cache) == 0o700, oct(mode(cache))
    assert all(mode(p) == (0o700 if p.is_dir() else 0o600) for p in cache.rglob("*")), shown


def test_the_doctor_warns_about_a_data_directory_others_can_read(sim):
    base = Path(tempfile.mkdtemp(prefix="assistant-doctor-"))  # a folder everyone can enter
    try:
        os.chmod(base, 0o755)
        data = base / "data"
        data.mkdir()
        os.chmod(data, 0o755)
        ran = cli(data, "doctor", engine=sim)
        assert b"data directory" in ran.stdout and f"chmod 700 {data}".encode() in ran.stdout, (
            ran.stdout.decode()
        )
    finally:
        shutil.rmtree(base)
