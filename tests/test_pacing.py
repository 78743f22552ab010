"""The pace of a call's passes while the person speaks (`call.transcribing.next_step`): they
thin out while transcription falls behind the speech and come back when it keeps up. Pure."""

from __future__ import annotations

from assistant.call.transcribing import MAX_STEP_MS, next_step


def test_the_passes_slow_down_while_they_fall_behind_and_come_back_when_they_keep_up():
    base = 1000.0
    step = next_step(base, took_ms=800, base_ms=base)  # 80% of the step: behind
    assert step == 2000
    step = next_step(step, took_ms=1500, base_ms=base)
    assert step == 4000
    assert next_step(step, took_ms=3900, base_ms=base) == MAX_STEP_MS  # bounded
    assert next_step(step, took_ms=2000, base_ms=base) == step  # keeping up: as it is
    step = next_step(step, took_ms=300, base_ms=base)
    assert step == 2000
    assert next_step(1000.0, took_ms=100, base_ms=base) == base  # never under the base
