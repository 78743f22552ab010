"""The web app as a real process on a loopback port, driven through its named API endpoints."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from gradio_client import Client, handle_file

from assistant.store.db import Store
from assistant.web.edge.security import is_loopback
from tests.app_proc import REPO, App, app_env, free_port, run_app
from tests.conftest import AUDIO
from tests.simengine_proc import run_simengine
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with run_simengine("--token-ms", "2") as url:
        yield url


@pytest.fixture(scope="module")
def app(sim: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with run_app(tmp_path_factory.mktemp("app"), sim) as running:
        yield running


@pytest.fixture(scope="module")
def client(app: App) -> Client:
    return Client(app.url, verbose=False)


def test_page_is_served_with_the_pid_file(app):
    page = httpx.get(app.url, timeout=10)
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert (app.data_dir / "serve.pid").read_text().strip() == str(app.proc.pid)


def test_only_the_named_endpoints_are_public(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert names == {"/chat", "/delegate", "/jobs", "/transcribe"}


def test_chat_returns_the_reply_with_lane_reason_and_timings(client):
    reply = client.predict("hello there", api_name="/chat")
    assert reply["reply"].startswith("You said: hello there")
    assert reply["lane"] == "chat" and reply["reason"]
    assert {"route", "ttft", "llm_total", "total"} <= set(reply["timings_ms"])
    assert reply["error"] is None and reply["conversation_id"]
    again = client.predict(
        "and again", reply["conversation_id"], api_name="/chat"
    )  # the same conversation continues
    assert again["conversation_id"] == reply["conversation_id"]


def test_empty_chat_is_a_clear_error(client):
    with pytest.raises(Exception, match="empty"):
        client.predict("   ", api_name="/chat")


def test_delegate_queues_a_job_the_app_runs(client):
    job = client.predict("summarize the history of tea", "key-1", api_name="/delegate")
    assert job["state"] in ("queued", "running") and job["owner"] == "local"
    twice = client.predict("summarize the history of tea", "key-1", api_name="/delegate")
    assert twice["id"] == job["id"], "the same key gives the same job"

    def ended() -> dict | None:
        mine = next(j for j in client.predict(api_name="/jobs") if j["id"] == job["id"])
        return mine if mine["state"] not in ("queued", "running") else None

    # the job worker runs inside the app: the job finished with no other process
    done = wait_until(ended, 60, "the job to end", every=0.5)
    assert done["state"] == "done", done
    assert "summarize the history of tea" in done["result"]
    assert "reasoning" not in done


def test_transcribe_real_speech(client):
    out = client.predict(handle_file(str(AUDIO / "jfk.flac")), api_name="/transcribe")
    assert "fellow americans" in out["text"].lower()
    assert out["language"] == "en" and out["duration_s"] == pytest.approx(11.0, abs=0.2)


def test_transcribe_rejects_non_audio(client, tmp_path):
    bogus = tmp_path / "notes.wav"
    bogus.write_bytes(b"not audio at all" * 20)
    with pytest.raises(Exception, match="not an audio file"):
        client.predict(handle_file(str(bogus)), api_name="/transcribe")


def test_stopping_hands_running_jobs_back_and_removes_the_pid_file(tmp_path):
    # a slow engine, so the job is still running when the app is told to stop
    with run_simengine("--token-ms", "200") as slow, run_app(tmp_path / "app", slow) as running:
        pidfile = running.data_dir / "serve.pid"
        assert pidfile.exists()
        job = Client(running.url, verbose=False).predict("a slow task", api_name="/delegate")
        store = Store(running.data_dir / "assistant.db")
        wait_until(lambda: store.job(job["id"]).state == "running", 10, "the job to start")
        running.proc.send_signal(signal.SIGTERM)
        assert running.proc.wait(timeout=30) == 0
        # the worker was cancelled with the server: the job went back to the queue
        assert store.job(job["id"]).state == "queued"
        store.close()
    assert not pidfile.exists()


def test_login_makes_the_user_the_owner(sim, tmp_path):
    with run_app(tmp_path / "app", sim, ASSISTANT_AUTH="ann:secret-pw") as running:
        with pytest.raises(Exception):  # noqa: B017 - any refusal will do
            Client(running.url, verbose=False)
        ann = Client(running.url, auth=("ann", "secret-pw"), verbose=False)
        job = ann.predict("a task for ann", api_name="/delegate")
        assert job["owner"] == "ann"
        assert [j["id"] for j in ann.predict(api_name="/jobs")] == [job["id"]]


def test_engine_down_then_back(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with run_app(tmp_path / "app", url) as running:  # the page loads with no engine
        client = Client(running.url, verbose=False)
        # the turn ends with the engine's error after the lane's tries (counted in
        # test_engine's test_engine_down_fails_fast_with_a_clear_message), not a hang
        down = client.predict("hello", api_name="/chat")
        assert "unreachable" in down["error"] and down["reply"] == ""
        with run_simengine("--port", str(port), "--token-ms", "2"):
            up = client.predict("hello again", api_name="/chat")  # recovers by itself
        assert up["error"] is None and up["reply"].startswith("You said: hello again")


def test_non_loopback_host_without_login_is_refused(sim, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "app.py"), "--host", "0.0.0.0", "--port", str(free_port())],
        env=app_env(tmp_path, sim),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "ASSISTANT_AUTH" in proc.stderr
    assert not (tmp_path / "serve.pid").exists()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("127.0.0.2", True), ("0.0.0.0", False), ("192.168.1.5", False), ("example.org", False)],
)  # fmt: skip
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback
