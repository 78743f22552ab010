"""A reply's control characters are shown, never obeyed, by the terminal (issue 49, item 4):
`assistant chat` printed a reply's escape codes raw (a title change, a screen clear)."""

from __future__ import annotations

import json

import pytest

from assistant.terminal import json_line, visible

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
NASTY = f"before {TITLE}{CLEAR} after\r\x9b31m red \u202egnp.exe\u202c \x00\x08\x7f end"


def test_escape_sequences_are_written_out_visibly():
    shown = visible(NASTY)
    assert "\\x1b]0;pwned\\x07" in shown and "\\x1b[2J\\x1b[H" in shown
    assert "\\x0d" in shown and "\\x9b31m" in shown and "\\u202egnp.exe\\u202c" in shown
    assert "\\x00\\x08\\x7f" in shown
    # nothing left for a terminal to act on
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)
    assert "\u202e" not in shown and "\u202c" not in shown


@pytest.mark.parametrize(
    "text", ["plain", "two\nlines\tand a tab", "café, 日本語, emoji 🎉", "a \\x1b written out"]
)
def test_ordinary_text_is_shown_as_it_is(text):
    assert visible(text) == text


def test_json_stays_exact_and_carries_nothing_a_terminal_would_act_on():
    obj = {"reply": NASTY + " café 🎉\nnext", "timings_ms": {"ttft": 1.5}, "error": None}
    line = json_line(obj)
    assert json.loads(line) == obj  # the same text, exactly
    assert "\n" not in line and "café 🎉" in line  # readable text stays readable
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line)
    assert "\u202e" not in line
