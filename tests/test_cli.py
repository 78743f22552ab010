"""The `assistant` command as a user runs it: a real process, JSON on stdout, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.simengine_proc import run_simengine

REPO = Path(__file__).resolve().parent.parent


def run(args: list[str], tmp_path: Path, url: str | None = None, **env: str):
    environment = dict(os.environ, ASSISTANT_DATA_DIR=str(tmp_path), HF_HUB_OFFLINE="1", **env)
    if url:
        environment["ASSISTANT_ENGINE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "assistant.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=300,
    )


def test_chat_json_shape(sim_url, tmp_path):
    proc = run(["chat", "hello", "there", "--json"], tmp_path, sim_url)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1  # exactly one JSON object
    out = json.loads(lines[0])
    assert {"reply", "lane", "reason", "finish_reason", "timings_ms", "error"} <= set(out)
    assert out["reply"].startswith("You said") and out["error"] is None
    assert out["lane"] == "chat" and out["reason"]
    assert {"route", "ttft", "total"} <= set(out["timings_ms"])


def test_chat_deep_uses_the_deep_lane(sim_url, tmp_path):
    proc = run(["chat", "--deep", "--json", "plan it"], tmp_path, sim_url)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert out["lane"] == "deep" and out["reply"]


def test_budget_exhausted_exits_3_with_a_message(tmp_path):
    with run_simengine("--fault", "reasoning_only", "--token-ms", "1") as url:
        proc = run(["chat", "--json", "hi"], tmp_path, url)
    assert proc.returncode == 3
    out = json.loads(proc.stdout)
    assert out["error"] and "reasoning budget" in out["error"]
    assert "Traceback" not in proc.stderr


def test_engine_down_exits_1_with_one_line(tmp_path):
    proc = run(["chat", "hi"], tmp_path, "http://127.0.0.1:9/v1")
    assert proc.returncode == 1
    assert "unreachable" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["chat"], ["bogus"], ["jobs", "frobnicate"]])
def test_usage_errors_exit_2(tmp_path, args):
    assert run(args, tmp_path).returncode == 2


def test_empty_text_is_bad_input(tmp_path):
    proc = run(["chat", "  "], tmp_path, "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "empty" in proc.stderr


def test_delegate_no_wait_queues_and_jobs_lists_it(sim_url, tmp_path):
    proc = run(["delegate", "--no-wait", "--json", "--key", "k1", "big task"], tmp_path, sim_url)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)
    assert job["state"] == "queued"
    again = json.loads(
        run(
            ["delegate", "--no-wait", "--json", "--key", "k1", "big task"], tmp_path, sim_url
        ).stdout
    )
    assert again["id"] == job["id"]  # idempotent
    listed = [json.loads(x) for x in run(["jobs", "list", "--json"], tmp_path).stdout.splitlines()]
    assert [j["id"] for j in listed] == [job["id"]]
    shown = json.loads(run(["jobs", "show", job["id"], "--json"], tmp_path).stdout)
    assert shown["prompt"] == "big task"
    cancel = run(["jobs", "cancel", job["id"], "--json"], tmp_path)
    assert cancel.returncode == 0 and json.loads(cancel.stdout)["cancelled"] is True
    assert run(["jobs", "show", "nope"], tmp_path).returncode == 1


def test_delegate_wait_runs_the_job_when_no_app_runs(sim_url, tmp_path):
    proc = run(["delegate", "--wait", "--json", "write the plan"], tmp_path, sim_url)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)
    assert job["state"] == "done" and job["result"]


def test_chat_continues_the_latest_conversation_unless_told(sim_url, tmp_path):
    # with no app running the turn runs here, by the same rule as through the app
    first = json.loads(run(["chat", "--json", "my cat is Tom"], tmp_path, sim_url).stdout)
    second = json.loads(run(["chat", "--json", "his name?"], tmp_path, sim_url).stdout)
    assert second["conversation_id"] == first["conversation_id"]
    fresh = json.loads(run(["chat", "--new", "--json", "hello"], tmp_path, sim_url).stdout)
    assert fresh["conversation_id"] != first["conversation_id"]
    named = ["chat", "--json", "--conversation", first["conversation_id"], "and now?"]
    again = json.loads(run(named, tmp_path, sim_url).stdout)
    assert again["conversation_id"] == first["conversation_id"]
    unknown = run(["chat", "--conversation", "nope", "hi"], tmp_path, sim_url)
    assert unknown.returncode == 1 and "no conversation nope" in unknown.stderr
    assert run(["chat", "--new", "--conversation", "x", "hi"], tmp_path).returncode == 2
