"""`bench qos --vllm --engine-cpus`: where the engine goes by default, what a LIST means, and a
report of where processes ran that is read back from the kernel, not echoed from the request."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import pytest

from assistant.cli import main
from assistant.devtools.cpus import (
    cpus_allowed,
    format_cpu_list,
    parse_cpu_list,
    pin_to,
    pinned,
    placement,
    tree_cpus,
)

TWO = frozenset({0, 1})
two_cores = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="needs a process allowed on two cores"
)


@pytest.mark.parametrize(
    ("text", "cores"),
    [("1", {1}), ("0-1", {0, 1}), ("0-2,5,7-8", {0, 1, 2, 5, 7, 8}), (" 3 , 1 ", {1, 3})],
)
def test_a_cpu_list_reads_as_the_kernel_writes_it(text: str, cores: set[int]):
    assert parse_cpu_list(text) == cores
    assert parse_cpu_list(format_cpu_list(cores)) == cores
    assert format_cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"


@pytest.mark.parametrize("text", ["", "x", "1-", "3-1", "-1", "1,,2", "shared"])
def test_a_bad_cpu_list_is_refused(text: str):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_by_default_the_engine_gets_all_but_the_first_core():
    two = placement(None, TWO)
    assert (two.engine, two.rest) == ({1}, {0})
    four = placement(None, frozenset({2, 3, 4, 5}))  # a process allowed on cores 2-5 only
    assert (four.engine, four.rest) == ({3, 4, 5}, {2})


def test_one_core_or_shared_puts_everything_everywhere():
    assert placement(None, frozenset({0})).engine is None
    assert "one core" in placement(None, frozenset({0})).why
    shared = placement("shared", TWO)
    assert (shared.engine, shared.rest) == (None, None)


def test_a_list_must_be_available_and_leave_a_core_for_the_app():
    got = placement("2-3", frozenset({0, 1, 2, 3}))
    assert (got.engine, got.rest) == ({2, 3}, {0, 1})
    with pytest.raises(ValueError, match="not available"):
        placement("2", TWO)
    with pytest.raises(ValueError, match="no core left"):
        placement("0-1", TWO)


def test_a_bad_engine_cpus_is_a_usage_error_before_any_engine_starts(capsys):
    assert main(["bench", "qos", "--vllm", "--engine-cpus", "0-4095"]) == 2
    assert "not available" in capsys.readouterr().err
    assert main(["bench", "qos", "--engine-cpus", "1"]) == 2  # not without --vllm
    assert "qos --vllm" in capsys.readouterr().err


def test_cpus_allowed_is_the_kernels_figure():
    assert parse_cpu_list(cpus_allowed(os.getpid()) or "") == os.sched_getaffinity(0)
    assert cpus_allowed(2**22 + 12345) is None  # no such process


@two_cores
def test_pinned_moves_every_thread_and_puts_them_back():
    import threading

    before = os.sched_getaffinity(0)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()  # a thread that exists before pinning: it has an affinity of its own
    try:
        first = min(before)
        with pinned(frozenset({first})):
            assert cpus_allowed(os.getpid()) == str(first)  # every thread, the old one too
        assert os.sched_getaffinity(0) == before
        assert parse_cpu_list(cpus_allowed(os.getpid()) or "") == before
    finally:
        stop.set()
        other.join()


@two_cores
def test_a_pinned_child_and_its_children_report_their_cores():
    core = max(os.sched_getaffinity(0))
    child = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], preexec_fn=pin_to(frozenset({core})))
    try:
        deadline = time.monotonic() + 10
        while len(tree := tree_cpus(child.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the shell starts its sleep
        assert [p["name"] for p in tree] == ["sh", "sleep"]
        assert {p["cpus"] for p in tree} == {str(core)}
        assert tree[0]["pid"] == child.pid
    finally:
        for p in reversed(tree_cpus(child.pid)):  # the sleep, then the shell: by their ids
            assert isinstance(p["pid"], int) and p["pid"] > 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(p["pid"], signal.SIGKILL)
        child.wait()


def test_no_pin_is_no_change():
    assert pin_to(None) is None
    before = os.sched_getaffinity(0)
    with pinned(None):
        assert os.sched_getaffinity(0) == before


@two_cores
def test_the_vllm_bench_pins_the_engine_and_itself_and_reports_it(monkeypatch, settings):
    """The bench's wiring, with a stand-in engine: the engine's process tree on all but the
    first core, the bench (the app in it) on the first while it measures, and the report read
    back from the kernel."""
    from assistant.devtools import qosbench_vllm

    cores = os.sched_getaffinity(0)
    first, engine_cores = min(cores), format_cpu_list(cores - {min(cores)})
    seen: dict[str, str | None] = {}

    @contextlib.contextmanager
    def fake_vllm(scratch, flags, *, max_num_seqs, cpus):
        proc = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], preexec_fn=pin_to(cpus))
        try:
            while len(tree_cpus(proc.pid)) < 2:
                time.sleep(0.05)
            yield type("Server", (), {"proc": proc, "url": "http://127.0.0.1:9/v1"})()
        finally:
            for p in reversed(tree_cpus(proc.pid)):
                assert isinstance(p["pid"], int) and p["pid"] > 1
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p["pid"], signal.SIGKILL)
            proc.wait()

    def fake_qos(s, label, rounds, gap_s, deep):
        seen[label] = cpus_allowed(os.getpid())
        return {"saturated_scheduler_on": {"worker_cpus": str(first)}}

    monkeypatch.setattr(qosbench_vllm, "run_vllm", fake_vllm)
    monkeypatch.setattr(qosbench_vllm, "_qos_on", fake_qos)
    monkeypatch.setattr(qosbench_vllm, "tail_lines", lambda result: [])
    out = qosbench_vllm.bench_qos_vllm(settings, 2)
    assert set(seen.values()) == {str(first)}  # the bench measured from the first core
    assert os.sched_getaffinity(0) == cores  # and has all of them back
    assert out["cpus"] == {
        "placement": "default: all but the first",
        "engine": engine_cores,
        "bench_app_worker": str(first),
    }
    for policy in ("fcfs", "priority"):
        where = out[f"vllm_{policy}"]["cpus"]
        assert [p["name"] for p in where["engine"]] == ["sh", "sleep"]
        assert {p["cpus"] for p in where["engine"]} == {engine_cores}
        assert where["engine_pinned"] is True and where["worker"] == str(first)
        assert where["bench_and_app"] == str(first)
    shared = qosbench_vllm.bench_qos_vllm(settings, 2, "shared")
    assert (
        shared["cpus"]["engine"] == "shared" and "engine_pinned" not in shared["vllm_fcfs"]["cpus"]
    )
