"""What the command line prints from a reply is shown by the terminal, never obeyed (issue 49).

A reply is the model's text, and a model repeats what it is given: an escape sequence in it
(ESC ] 0 ; ... BEL retitles the window, ESC [ 2 J clears the screen, others move the cursor to
rewrite what was printed, or make some terminals answer as if typed) would be run by the
terminal. Every control character but newline and tab, and the marks that reorder text
(bidirectional overrides), is printed as a visible escape (`\\x1b`, `\\u202e`), whether
stdout is a terminal or a file. `--json` stays exact JSON: the same characters are written as
JSON's own escapes, which decode to the same text.
"""

from __future__ import annotations

import json
import re
from typing import Any

HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but newline and tab, DEL, C1 controls (0x9b is an 8-bit ESC [), and the
marks that change the order text is shown in."""
UNESCAPED_IN_JSON = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What `json.dumps(..., ensure_ascii=False)` leaves raw (it escapes C0 controls itself)."""


def visible(text: str) -> str:
    """`text` with every character a terminal would act on written out as an escape."""
    return HIDDEN.sub(_escape, text)


def json_line(obj: Any) -> str:
    """`obj` as one line of JSON, readable text kept, with nothing a terminal would act on."""
    return UNESCAPED_IN_JSON.sub(
        lambda m: f"\\u{ord(m[0]):04x}", json.dumps(obj, ensure_ascii=False)
    )


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
