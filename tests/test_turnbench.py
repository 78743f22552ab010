"""`bench turns` on jfk.flac with the real VAD and turn-end model (issue 51, item 7): its
mid-sentence pauses are found and counted, the report has the curve and LiveKit's figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from assistant.devtools.turnbench import measure
from tests.conftest import AUDIO


def test_jfk_pauses_are_counted_and_the_curve_is_reported(tmp_path: Path):
    shutil.copy(AUDIO / "jfk.flac", tmp_path / "jfk.flac")
    (tmp_path / "transcripts.json").write_text(json.dumps({"jfk.flac": {"text": "..."}}))
    # the listener's own schedule only, to keep it short
    offsets = (200, 500, 800, 1100, 1400, 1500)
    r = measure([tmp_path], offsets=offsets)
    assert r["recordings"] == ["jfk.flac"]
    assert r["n_pauses"] >= 2 and r["n_ends"] == 1
    # "... can do for you, | ask what ...": a pause of about 1.1 s, heard as one
    assert any(s["kind"] == "pause" and s["length_ms"] >= 1000 for s in r["silences"])
    assert [row["delay_ms"] for row in r["listener_by_delay"]] == list(offsets)
    for row in r["listener_by_delay"]:
        assert row["n_pauses"] == r["n_pauses"] and row["n_ends"] == 1
        assert 0.0 <= row["false_end_share"] <= 1.0
    assert r["listener_by_delay"][-1]["ends_detected_share"] == 1.0  # the fallback at least
    f = r["figures"]
    assert f["n_pauses"] == r["n_pauses"] and f["n_ends"] == 1
    assert f["smallest_delay_within_5pct_ms"] is not None
    assert r["livekit_anchors"]["smart_turn_v3_2"]["delay_within_5pct_ms"] == 1051
    assert any("false ends at 300 ms" in line for line in r["summary"])
