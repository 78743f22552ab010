"""Push-to-talk latency counts from when the page sent the recording (issue 20, item 6): the
upload and Gradio's queue are part of the user's wait. A page clock that disagrees with the
server's (another device) is not trusted."""

from __future__ import annotations

import time

from assistant.web.page.page import STAMP_SENT_JS
from assistant.web.page.turns import MAX_CLOCK_GAP_MS, waited_ms


def test_the_wait_since_the_page_sent_the_recording_counts(monkeypatch):
    now = time.time() * 1000
    monkeypatch.setattr(time, "time", lambda: now / 1000)  # the server's clock, held still
    assert waited_ms(now - 2000) == 2000
    assert waited_ms(None) == 0.0
    assert waited_ms(now + 5000) == 0.0  # a page clock ahead of the server's
    assert waited_ms(now - MAX_CLOCK_GAP_MS - 5000) == 0.0  # or far behind it
    assert "Date.now()" in STAMP_SENT_JS  # the page stamps it when it sends
