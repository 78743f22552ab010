"""The command line beside a running app (issue 34, item 5): `assistant chat`, `delegate` and
`jobs` on the app's data directory go through the app, a real `assistant serve` on the simulated
engine, and the CLI a real subprocess.

The CLI is given an engine URL nobody listens on: a turn it ran itself would fail ("engine
unreachable"), so an answer proves the app's engine answered it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from assistant.app_client import DISCOVERY_FILE, SECRET_HEADER, process_start
from assistant.store.db import Store
from tests.app_proc import CLI_SERVE, App, run_app
from tests.proxy_proc import run_nginx
from tests.simengine_proc import root_url, run_simengine, sim_requests, sim_reset
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent
DEAD_ENGINE = "http://127.0.0.1:9/v1"
USERS = {"ann": "pw-ann-34", "bob": "pw-bob-34"}
AUTH = ",".join(f"{u}:{p}" for u, p in USERS.items())
OWN_ADDRESS = "192.0.2.2"
"""This machine's non-loopback address (eth0): a peer there is not loopback."""


def cli(data_dir: Path, *args: str, engine: str = DEAD_ENGINE) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.update(ASSISTANT_DATA_DIR=str(data_dir), ASSISTANT_ENGINE_URL=engine,
               PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "assistant.cli", *args], env=env, cwd=data_dir,
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def announced(app: App) -> dict:
    path = app.data_dir / DISCOVERY_FILE
    wait_until(path.exists, 30, "the app's discovery file")
    return json.loads(path.read_text())


def chats(sim: str, text: str) -> list[dict]:
    """The engine requests that carry `text`."""
    return [r for r in sim_requests(sim) if text in json.dumps(r["body"]["messages"])]


def engine_requests(sim: str) -> tuple[float, float]:
    """The requests the engine is running and has waiting (its vLLM-style /metrics)."""
    lines = httpx.get(root_url(sim) + "/metrics", timeout=5).text.splitlines()

    def gauge(name: str) -> float:
        return next(float(ln.split()[-1]) for ln in lines if ln.startswith(f"vllm:{name}{{"))

    return gauge("num_requests_running"), gauge("num_requests_waiting")


def job_of(data_dir: Path, job_id: str) -> dict:
    return json.loads(cli(data_dir, "jobs", "show", job_id, "--json").stdout)


def stored(data_dir: Path, cid: str) -> list:
    store = Store(data_dir / "assistant.db")
    try:
        return store.transcript(cid)
    finally:
        store.close()


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    # replies of 40 words at 25 ms a token: long enough to see a reply arrive in pieces
    flags = ("--token-ms", "25", "--answer-words", "40", "--auto-tool-choice")
    with run_simengine(*flags) as url:
        yield url


@pytest.fixture(scope="module")
def app(sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with run_app(tmp_path_factory.mktemp("cli-app"), sim, entry=CLI_SERVE) as running:
        announced(running)
        yield running


def test_the_app_announces_itself_to_its_own_user_only(app):
    path = app.data_dir / DISCOVERY_FILE
    info = announced(app)
    assert path.stat().st_mode & 0o777 == 0o600 and path.stat().st_uid == os.getuid()
    assert info["pid"] == app.proc.pid and info["url"] == app.url.rstrip("/")
    assert len(info["secret"]) >= 40
    ok = httpx.get(app.url + "v1/models", headers={SECRET_HEADER: info["secret"]}, timeout=10)
    assert ok.status_code == 200
    wrong = httpx.get(app.url + "v1/models", headers={SECRET_HEADER: "guess"}, timeout=10)
    assert wrong.status_code == 401


def test_chat_beside_the_app_is_answered_by_the_app(app, sim):
    sim_reset(sim)
    proc = cli(app.data_dir, "chat", "--new", "--json", "What is the capital of France?")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert {"reply", "lane", "reason", "finish_reason", "timings_ms", "error"} <= set(out)
    assert out["reply"].startswith("You said") and out["error"] is None
    assert out["lane"] == "chat" and out["reason"] and out["finish_reason"] == "stop"
    assert {"route", "ttft", "total"} <= set(out["timings_ms"])
    # one request at the app's engine; the turn is in the app's store, as an API turn
    assert len(chats(sim, "capital of France")) == 1
    [turn] = stored(app.data_dir, out["conversation_id"])
    assert turn.user_text == "What is the capital of France?" and turn.source == "api"


def test_chat_prints_the_reply_as_it_arrives(app):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.update(ASSISTANT_DATA_DIR=str(app.data_dir), ASSISTANT_ENGINE_URL=DEAD_ENGINE,
               PYTHONPATH=str(REPO))  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "assistant.cli", "chat", "--new", "tell me about rivers"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.read1(4096)  # type: ignore[attr-defined]
        running = proc.poll() is None  # the rest of the reply is still coming
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert first.startswith(b"You said") and running
    assert proc.returncode == 0
    assert len((first + rest).decode().split()) == 40  # the whole reply, once
    assert f"through the app at {app.url.rstrip('/')}" in err.decode()


def test_chat_continues_the_latest_conversation_and_new_starts_another(app, sim):
    first = json.loads(cli(app.data_dir, "chat", "--new", "--json", "my cat is Tom").stdout)
    sim_reset(sim)
    second = json.loads(cli(app.data_dir, "chat", "--json", "what is my cat called").stdout)
    assert second["conversation_id"] == first["conversation_id"]
    # the app's engine saw the conversation so far
    [request] = chats(sim, "what is my cat called")
    assert "my cat is Tom" in json.dumps(request["body"]["messages"])
    turns = stored(app.data_dir, first["conversation_id"])
    assert [t.user_text for t in turns] == ["my cat is Tom", "what is my cat called"]
    other = json.loads(cli(app.data_dir, "chat", "--new", "--json", "hello").stdout)
    assert other["conversation_id"] != first["conversation_id"]
    named = cli(app.data_dir, "chat", "--json", "--conversation", first["conversation_id"], "hi")
    assert json.loads(named.stdout)["conversation_id"] == first["conversation_id"]
    unknown = cli(app.data_dir, "chat", "--conversation", "nope", "hi")
    assert unknown.returncode == 1 and "no conversation nope" in unknown.stderr


def test_chat_through_the_app_carries_the_apps_own_history(app, sim):
    """The command line's history is the app's (issue 47): a reply the person stopped is
    carried as far as it was heard, marked, as the page's next turn carries it; the command
    line reads no store and builds no history of its own."""
    from assistant.prompting.history import INTERRUPTED_MARK
    from assistant.records import STOPPED, TurnResult

    first = json.loads(cli(app.data_dir, "chat", "--new", "--json", "tell me about otters").stdout)
    store = Store(app.data_dir / "assistant.db")
    try:  # the person stopped the next reply while it was being said (as a call stores it)
        cut = TurnResult("Otters hold hands while they", "chat", "test", None, error=STOPPED)
        store.add_turn(first["conversation_id"], "and sea otters?", cut, source="voice")
    finally:
        store.close()
    sim_reset(sim)
    proc = cli(app.data_dir, "chat", "--json", "thanks! what time is it there?")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["conversation_id"] == first["conversation_id"]
    [request] = chats(sim, "thanks! what time is it there?")
    sent = json.dumps(request["body"]["messages"])
    heard = json.dumps("Otters hold hands while they" + INTERRUPTED_MARK)[1:-1]
    assert heard in sent and "and sea otters?" in sent
    assert "tell me about otters" in sent


def test_chat_deep_runs_on_the_apps_deep_lane(app, sim):
    sim_reset(sim)
    proc = cli(app.data_dir, "chat", "--new", "--deep", "--json", "plan the migration")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["lane"] == "deep" and out["reply"]
    assert len(chats(sim, "plan the migration")) == 1


def test_delegate_beside_the_app_is_run_by_its_worker(app):
    queued = cli(app.data_dir, "delegate", "--no-wait", "--json", "write a report on rivers")
    assert queued.returncode == 0, queued.stderr
    job = json.loads(queued.stdout)
    wait_until(lambda: job_of(app.data_dir, job["id"])["state"] == "done", 60,
               "the app's worker to run the queued job")  # fmt: skip
    assert job_of(app.data_dir, job["id"])["result"].startswith("You said")
    # --wait waits for the app's worker (the CLI's own engine is unreachable)
    waited = cli(app.data_dir, "delegate", "--wait", "--json", "write a plan for the garden")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["state"] == "done"


def test_jobs_cancel_stops_the_job_at_the_apps_worker(app, sim):
    base = root_url(sim)
    httpx.post(base + "/sim/hold", timeout=5).raise_for_status()
    try:
        queued = cli(app.data_dir, "delegate", "--no-wait", "--json", "write a long essay")
        job = json.loads(queued.stdout)
        wait_until(lambda: job_of(app.data_dir, job["id"])["state"] == "running", 60,
                   "the app's worker to start the job")  # fmt: skip
        wait_until(lambda: engine_requests(sim) == (1, 0), 60,
                   "the job's request to be held at the engine")  # fmt: skip
        cancel = cli(app.data_dir, "jobs", "cancel", job["id"], "--json")
        assert cancel.returncode == 0 and json.loads(cancel.stdout)["cancelled"] is True
        # the worker stops: it leaves the engine while the answer is still held, so no
        # answer can reach it after the release
        wait_until(lambda: engine_requests(sim) == (0, 0), 60,
                   "the app's worker to leave the engine")  # fmt: skip
    finally:
        httpx.post(base + "/sim/release", timeout=5).raise_for_status()
    shown = job_of(app.data_dir, job["id"])
    assert shown["state"] == "cancelled" and not shown["result"]


def test_a_stale_discovery_file_is_ignored(sim, tmp_path):
    with run_app(tmp_path, sim, entry=CLI_SERVE) as app:
        info = announced(app)
        os.kill(app.proc.pid, signal.SIGKILL)
        app.proc.wait(30)
    assert (tmp_path / DISCOVERY_FILE).exists()  # killed: nobody removed it
    ran = cli(tmp_path, "chat", "--json", "hi after the crash", engine=sim)
    assert ran.returncode == 0, ran.stderr  # in this process, on its own engine
    assert "did not answer" not in ran.stderr
    # a live process that is not the app (this test's), at an address nobody answers: it is
    # not asked at all (it does not hold the socket there)
    (tmp_path / DISCOVERY_FILE).write_text(json.dumps({
        "url": "http://127.0.0.1:9", "pid": os.getpid(), "started": process_start(os.getpid()),
        "secret": info["secret"]}))  # fmt: skip
    os.chmod(tmp_path / DISCOVERY_FILE, 0o600)
    ran = cli(tmp_path, "chat", "--json", "hi again", engine=sim)
    assert ran.returncode == 0 and "does not listen" in ran.stderr
    # a file others could read (or have written) is not trusted at all
    os.chmod(tmp_path / DISCOVERY_FILE, 0o644)
    ran = cli(tmp_path, "chat", "--json", "and again", engine=sim)
    assert ran.returncode == 0 and "did not answer" not in ran.stderr


def test_a_clean_stop_removes_the_discovery_file(sim, tmp_path):
    with run_app(tmp_path, sim, entry=CLI_SERVE) as app:
        announced(app)
    assert not (tmp_path / DISCOVERY_FILE).exists()
    # and with no app the CLI runs the turn itself, continuing its latest conversation
    first = json.loads(cli(tmp_path, "chat", "--json", "one", engine=sim).stdout)
    second = json.loads(cli(tmp_path, "chat", "--json", "two", engine=sim).stdout)
    assert first["conversation_id"] == second["conversation_id"]


# --- with logins: the secret is no way around ASSISTANT_AUTH ------------------------------


@pytest.fixture(scope="module")
def guarded(sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("cli-guarded")
    env = {"ASSISTANT_AUTH": AUTH, "ASSISTANT_ALLOWED_HOSTS": OWN_ADDRESS}
    with run_app(data, sim, "--host", "0.0.0.0", entry=CLI_SERVE, **env) as running:
        announced(running)
        yield running


def ask(url: str, text: str, headers: dict[str, str]) -> httpx.Response:
    body = {"model": "assistant", "messages": [{"role": "user", "content": text}]}
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=120)


def test_with_logins_the_cli_is_the_local_user(guarded):
    proc = cli(guarded.data_dir, "chat", "--new", "--json", "hello from the shell")
    assert proc.returncode == 0, proc.stderr
    cid = json.loads(proc.stdout)["conversation_id"]
    store = Store(guarded.data_dir / "assistant.db")
    try:
        assert store.conversation_owner(cid) == "local"
    finally:
        store.close()


def test_the_secret_is_refused_from_another_address(guarded):
    secret = announced(guarded)["secret"]
    port = guarded.url.rstrip("/").rsplit(":", 1)[1]
    remote = f"http://{OWN_ADDRESS}:{port}"
    refused = ask(remote, "hi", {SECRET_HEADER: secret})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "loopback_only"
    # the same address with a login is served: the refusal is the secret's, not the address's
    login = ask(remote, "hi", {"Authorization": f"Bearer ann:{USERS['ann']}"})
    assert login.status_code == 200, login.text


def test_the_secret_is_refused_through_a_reverse_proxy(guarded, tmp_path):
    secret = announced(guarded)["secret"]
    with run_nginx(tmp_path, guarded.url.rstrip("/")) as proxy:
        refused = ask(proxy, "hi", {SECRET_HEADER: secret})
        login = ask(proxy, "hi", {"Authorization": f"Bearer ann:{USERS['ann']}"})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "loopback_only"
    assert login.status_code == 200, login.text  # the proxy itself is served with a login


def test_the_secret_is_only_the_local_user(guarded):
    secret = announced(guarded)["secret"]
    url = guarded.url.rstrip("/")
    anns = ask(url, "ann's secret plans", {"Authorization": f"Bearer ann:{USERS['ann']}"})
    cid = anns.headers["x-assistant-conversation"]
    other = ask(url, "show me", {SECRET_HEADER: secret, "X-Assistant-Conversation": cid})
    assert other.status_code == 404, other.text
    wrong = ask(url, "hi", {SECRET_HEADER: secret[:-2] + "xx"})
    assert wrong.status_code == 401
    none = ask(url, "hi", {})
    assert none.status_code == 401  # a loopback client still needs a login


def test_an_exhausted_budget_through_the_app_is_exit_3_with_the_json(tmp_path):
    with run_simengine("--fault", "reasoning_only", "--token-ms", "1") as exhausting:
        with run_app(tmp_path, exhausting, entry=CLI_SERVE) as app:
            announced(app)
            proc = cli(tmp_path, "chat", "--json", "hi")
    assert proc.returncode == 3, proc.stderr
    out = json.loads(proc.stdout)
    assert out["error"] and "reasoning budget" in out["error"] and not out["reply"]
    assert out["lane"] == "chat" and out["finish_reason"] == "length"
    assert "Traceback" not in proc.stderr
