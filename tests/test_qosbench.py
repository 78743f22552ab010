"""`bench qos`'s figures mean what they say: samples are real turns, a turn with no token is
no time to first token, and the target holds only with deep work running all through."""

from __future__ import annotations

import pytest

from assistant.devtools.qosbench import (
    PROBES,
    Condition,
    _chat_ttft,
    _measure,
    tail_lines,
    tail_verdict,
    verdict,
)
from assistant.runtime import Runtime
from tests.conftest import sim_settings
from tests.simengine_proc import sim_requests, sim_reset

pytestmark = pytest.mark.process


def _summary(p95: float, rounds: int = 12, **extra: int) -> dict:
    base = {"n": rounds, "p50_ms": p95 / 2, "p95_ms": p95, "samples": rounds, "no_token": 0}
    return base | {"not_chat_lane": 0, "samples_with_deep_running": rounds} | extra


def _tail(p99: float, gap_p95: float, rounds: int = 12, **extra) -> dict:
    gaps = {"n": 4 * rounds, "p50_ms": gap_p95 / 2, "p95_ms": gap_p95, "p99_ms": gap_p95 * 2}
    return _summary(p99, rounds) | {"p99_ms": p99, "gaps": gaps} | extra


def test_a_sample_with_no_token_is_counted_not_timed():
    c = Condition([100.0, None, 300.0, 200.0], ["chat", "chat", "chat", "deep"])
    got = c.summary()
    assert got["n"] == 3 and got["samples"] == 4 and got["no_token"] == 1
    assert (got["p50_ms"], got["p95_ms"]) == (200.0, 300.0)  # nearest rank over the 3 tokens
    assert got["not_chat_lane"] == 1
    assert Condition([None, None], ["chat", "chat"]).summary()["p95_ms"] is None


def test_target_needs_deep_work_all_through_the_samples():
    idle = _summary(400.0)
    assert verdict(idle, _summary(500.0), 12) == {
        "target_p95_ms": 620.0,
        "saturated": True,
        "target_met": True,
    }
    # fast only because the deep work had ended: no saturated figure at all
    quiet = verdict(idle, _summary(450.0, samples_with_deep_running=9), 12)
    assert quiet["saturated"] is False and quiet["target_met"] is False


def test_the_gaps_between_chunks_are_pooled_with_their_n():
    gaps = [10.0] * 90 + [20.0] * 8 + [50.0, 400.0]  # one stutter in a hundred gaps
    got = Condition([100.0, 120.0], ["chat", "chat"], gaps).summary()
    assert got["gaps"] == {"n": 100, "p50_ms": 10.0, "p95_ms": 20.0, "p99_ms": 50.0}
    assert (got["p95_ms"], got["p99_ms"]) == (120.0, 120.0)  # the TTFT's tail too, n=2
    none = Condition([None], ["chat"]).summary()
    assert none["gaps"] == {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None}
    assert none["p99_ms"] is None


def test_the_tail_target_is_p99_ttft_and_p95_gaps():
    idle = _tail(p99=100.0, gap_p95=10.0)
    assert tail_verdict(idle, _tail(250.0, 15.0), 12) == {
        "target_p99_ttft_ms": 250.0,  # 1.5 x 100 + 100
        "target_p95_gap_ms": 15.0,  # 1.5 x 10
        "ttft_met": True,
        "gaps_met": True,
        "target_met": True,
    }
    slow_start = tail_verdict(idle, _tail(251.0, 10.0), 12)
    assert slow_start["ttft_met"] is False and slow_start["target_met"] is False
    stutter = tail_verdict(idle, _tail(100.0, 15.1), 12)
    assert stutter["gaps_met"] is False and stutter["target_met"] is False
    # fast only because the deep work had ended, or no gaps to judge: no tail figure
    quiet = tail_verdict(idle, _tail(100.0, 10.0, samples_with_deep_running=11), 12)
    assert quiet["ttft_met"] and quiet["gaps_met"] and not quiet["target_met"]
    no_gaps = _tail(100.0, 10.0) | {"gaps": {"n": 0, "p50_ms": None, "p95_ms": None}}
    assert tail_verdict(no_gaps, _tail(100.0, 10.0), 12)["target_met"] is False


def test_the_printed_tail_names_every_figure_with_its_n():
    idle = _tail(100.0, 10.0)
    results = {
        "engine": "vLLM priority",
        "idle": idle,
        "saturated_scheduler_on": _tail(200.0, 12.0),
        "saturated_scheduler_off": _tail(900.0, 30.0),
    }
    results["tail"] = {
        key: tail_verdict(idle, results[f"saturated_{key}"], 12)
        for key in ("scheduler_on", "scheduler_off")
    }
    on, off = tail_lines(results)
    assert on.startswith("vLLM priority, lanes on: chat TTFT p99 idle 100.0 ms (n=12)")
    assert "saturated 200.0 ms (n=12), limit 250.0" in on
    assert "chunk gaps p50/p95/p99 idle 5.0/10.0/20.0 ms (n=48)" in on
    assert on.endswith("tail target met") and off.endswith("tail target NOT met")


@pytest.mark.parametrize(
    "broken",
    [{"no_token": 1, "n": 11}, {"not_chat_lane": 1}, {"n": 11}],
    ids=["a turn without a token", "a turn that went deep", "a sample missing"],
)
def test_target_fails_on_a_turn_that_did_not_answer_on_chat(broken: dict):
    idle = _summary(400.0)
    assert verdict(idle, _summary(300.0, **broken), 12)["target_met"] is False
    assert verdict(_summary(400.0, **broken), _summary(300.0), 12)["target_met"] is False
    assert verdict(_summary(0.0, n=0, p95_ms=None), _summary(300.0), 12)["target_met"] is False


async def test_the_chat_probe_is_a_real_turn(sim_url, settings):
    """Router, system prompt, tools, the conversation's history: not one bare message."""
    with Runtime(sim_settings(settings, sim_url)) as rt:
        sim_reset(sim_url)
        samples = await _measure(rt, 3, 0.0)
        bodies = [r["body"] for r in sim_requests(sim_url)]
    assert samples.lanes == ["chat"] * 3 and all(t and t > 0 for t in samples.ttft_ms)
    # the simulator streams each reply in several chunks: the gaps between them, per turn
    assert len(samples.gaps_ms) >= 3 and all(g >= 0 for g in samples.gaps_ms)
    assert len(bodies) == 3
    last = bodies[-1]["messages"]
    assert last[0]["role"] == "system" and last[-1] == {"role": "user", "content": PROBES[2]}
    assert [m["content"] for m in last if m["role"] == "user"] == list(PROBES[:3])
    assert sum(m["role"] == "assistant" for m in last) == 2  # the earlier replies
    assert bodies[-1]["tools"][0]["function"]["name"] == "delegate"
    assert bodies[-1]["priority"] == 0


async def test_a_turn_with_no_token_has_no_ttft(settings):
    with Runtime(sim_settings(settings, "http://127.0.0.1:9/v1")) as rt:
        sample = await _chat_ttft(rt, PROBES[0], None)
    assert sample.ttft_ms is None and sample.lane == "chat" and sample.gaps_ms == []
