"""`bench voice --calls N` and `--busy`: the calls go through a running app's real `/listen`
(each its own login), and the spinner really takes a core. Figures are the benchmark's job;
here only that each call was heard, answered and counted."""

from __future__ import annotations

import shutil

from tests.conftest import AUDIO


def test_two_calls_at_once_are_each_answered_and_counted(sim_url, monkeypatch, tmp_path):
    from assistant.devtools.callbench import bench_calls

    shutil.copy(AUDIO / "hotwords.mp3", tmp_path / "hotwords.mp3")
    monkeypatch.setenv("ASSISTANT_ENGINE_URL", sim_url)
    report = bench_calls(2, 1, [tmp_path / "hotwords.mp3"])
    assert report["calls"] == 2 and report["recordings_per_call"] == 1
    assert report["turns_stored_per_call"] == [1, 1]  # each login its own conversation
    assert report["false_cutoffs"] == 0 and report["lost"] == 0
    assert report["replies_heard"] == [True, True]  # audio came back on each socket
    assert report["ended_by_app"] == [None, None]  # the bench hung up, not the app
    assert report["first_audio_from_last_word"]["n"] == 2
    assert report["app_cpu_ms_per_call_minute"] > 0


def test_busy_takes_a_core_while_the_block_runs_and_ends_with_it():
    import time

    from assistant.devtools.busy import busy_core

    with busy_core() as machine:
        time.sleep(1.5)
    assert machine["busy"] is True
    assert machine["spinner_core_share"] > 0.3  # a shared machine gives it less than a core
    with busy_core(False) as quiet:
        pass
    assert quiet == {"busy": False}
