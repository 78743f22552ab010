"""`assistant doctor` against live engines, and reading engines' Prometheus metrics."""

from __future__ import annotations

import json

from assistant.metrics import AppMetrics, parse_engine_metrics
from assistant.records import Timings
from tests.simengine_proc import run_simengine
from tests.test_cli import run

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="glm"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="glm"} 7.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="glm"} 0.42
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="glm"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="glm"} 250.0
"""

LLAMACPP_METRICS = """\
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 2
"""


def _checks(proc) -> dict[str, dict]:
    assert proc.returncode == 0, proc.stderr
    return {c["name"]: c for c in json.loads(proc.stdout)["checks"]}


def test_parse_vllm_and_llamacpp_metrics():
    m = parse_engine_metrics(VLLM_METRICS)
    assert (m.running, m.waiting, m.kv_usage) == (3.0, 7.0, 0.42)
    assert m.prefix_hit_rate == 0.25
    ll = parse_engine_metrics(LLAMACPP_METRICS)
    assert (ll.running, ll.waiting, ll.prefix_hit_rate) == (1.0, 2.0, None)


def test_app_metrics_render_prometheus_text():
    metrics = AppMetrics(lambda: {"chat_waiting": 1, "deep_running": 2}, lambda: {"done": 4})
    metrics.observe("chat", Timings(ttft=120.0, total=900.0))
    families = {
        f.name: f
        for f in __import__(
            "prometheus_client.parser", fromlist=["x"]
        ).text_string_to_metric_families(metrics.render().decode())
    }
    assert "assistant_turn_latency_ms" in families
    jobs = {s.labels["state"]: s.value for s in families["assistant_jobs"].samples}
    assert jobs["done"] == 4 and jobs["queued"] == 0
    lanes = {
        (s.labels["lane"], s.labels["state"]): s.value
        for s in families["assistant_lane_requests"].samples
    }
    assert lanes[("deep", "running")] == 2


def test_doctor_on_vllm_without_priority_policy(tmp_path):
    with run_simengine("--token-ms", "1") as url:
        checks = _checks(run(["doctor", "--json"], tmp_path, url))
    assert checks["reachable"]["ok"] is True
    assert checks["model"]["ok"] and "sim-model" in checks["model"]["detail"]
    assert checks["priority"]["ok"] is False
    assert "--scheduling-policy priority" in checks["priority"]["detail"]
    assert checks["reasoning field"]["ok"] is True
    assert checks["thinking off"]["ok"] is True
    assert "ms" in checks["latency"]["detail"]
    assert checks["prefix cache"]["ok"] is True
    assert checks["batched deep chunks"]["ok"] is True
    assert "stream_interval 16 accepted" in checks["batched deep chunks"]["detail"]
    # the priority probe filled the simulator's 4 sequences: the doctor says so beside the cap
    assert checks["deep lane"] == {
        "name": "deep lane",
        "ok": True,
        "detail": "vLLM runs 4 sequences at once; the deep lane may use 2 (the default; "
        "set ASSISTANT_DEEP_MAX_IN_FLIGHT=3 to use all but one)",
    }


def test_doctor_on_llamacpp_reads_its_slots_and_the_cap_follows(tmp_path):
    with run_simengine("--token-ms", "1", "--kind", "llamacpp", "--slots", "3") as url:
        checks = _checks(run(["doctor", "--json"], tmp_path, url))
        capped = _checks(run(["doctor", "--json"], tmp_path, url, ASSISTANT_DEEP_MAX_IN_FLIGHT="3"))
    assert checks["deep lane"]["ok"] is True
    assert checks["deep lane"]["detail"] == (
        "llama.cpp runs 3 sequences at once (as it reports); the deep lane may use 2 "
        "(the default), so one is always free for chat"
    )
    assert capped["deep lane"]["ok"] is None  # the app stops a deep request for chat
    assert (
        "set ASSISTANT_DEEP_MAX_IN_FLIGHT=2 to keep one for chat" in (capped["deep lane"]["detail"])
    )


def test_doctor_with_priority_policy(tmp_path):
    with run_simengine("--token-ms", "1", "--priority-policy") as url:
        checks = _checks(run(["doctor", "--json"], tmp_path, url))
    assert checks["priority"]["ok"] is True


def test_doctor_engine_down(tmp_path):
    proc = run(["doctor", "--json"], tmp_path, "http://127.0.0.1:9/v1")
    assert proc.returncode == 1
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["reachable"]["ok"] is False
