"""Reasoning a client folded into an earlier answer's text, removed in linear time (issue 38)."""

from __future__ import annotations

import bisect
import re

SHOWN_THINKING = re.compile(
    r"<details\b[^>]*\btype=\"reasoning\"[^>]*>.*?</details>\s*|<think>.*?</think>\s*", re.S
)
"""Reasoning a client folded into an earlier answer's text (Open WebUI's `<details>`): not part
of the answer the conversation stored. The pattern says what is removed; `strip_shown_thinking`
removes it in linear time (the pattern itself backtracks: cubic on `<details type="reasoning" `
repeated, a 45 kB request froze the event loop for 20 s, issue 38)."""
_THINKING_MARKS = re.compile(r"<details\b|<think>|</details>|</think>")
_REASONING_ATTR = re.compile(r"\btype=\"reasoning\"")


def strip_shown_thinking(text: str) -> str:
    """`SHOWN_THINKING.sub("", text)`, in time linear in the text.

    One pass over the markers (a literal alternation: no backtracking), each tag's end and
    closing marker looked up once: a `<details` whose tag is not reasoning skips every
    `<details` up to its `>` (they share that `>`, so none of them is either), and an opening
    with no closing after it means no later one has one."""
    marks = [(m.start(), m.group()) for m in _THINKING_MARKS.finditer(text)]
    if not marks:
        return text
    closes = {"</details>": [i for i, m in marks if m == "</details>"],
              "</think>": [i for i, m in marks if m == "</think>"]}  # fmt: skip
    out: list[str] = []
    pos = 0  # the text before it is decided
    details_from = 0  # a `<details` before this cannot start a match
    details_dead = think_dead = False
    for start, mark in marks:
        if start < pos:
            continue  # inside what a match removed
        end = -1
        if mark == "<details" and not details_dead and start >= details_from:
            tag_end = text.find(">", start)
            if tag_end < 0:
                details_dead = True
            elif not _REASONING_ATTR.search(text, start, tag_end):
                details_from = tag_end
            else:
                end = _after_close(text, closes["</details>"], tag_end + 1, "</details>")
                details_dead = end < 0
        elif mark == "<think>" and not think_dead:
            end = _after_close(text, closes["</think>"], start + len(mark), "</think>")
            think_dead = end < 0
        if end >= 0:
            out.append(text[pos:start])
            pos = end
    out.append(text[pos:])
    return "".join(out)


def _after_close(text: str, closes: list[int], since: int, mark: str) -> int:
    """Where the match ends: after the first `mark` at or after `since` and the white space
    after it; -1 when there is none."""
    found = bisect.bisect_left(closes, since)
    if found == len(closes):
        return -1
    end = closes[found] + len(mark)
    while end < len(text) and text[end].isspace():  # as `\s` matches
        end += 1
    return end
