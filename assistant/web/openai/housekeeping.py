"""A client's own housekeeping (issue 31): the background tasks a chat client sends through the
same endpoint as the person's messages (a title, tags, follow-up suggestions, search queries,
autocompletion), recognised so they stay small: chat lane, never a job, never a conversation.

Recognised by the request's shape, never by a guess about its topic:
- one user message and no conversation before it (a client's task carries the history it needs
  inside its own prompt; the person's turns in a conversation are never taken for one), and
- a prompt that reads as a task template: Open WebUI's (`### Task:` with an `### Output:` or
  `<chat_history>` section), another client's title prompt (LibreChat, Chatbox, LobeChat: a
  title or a name for "the conversation"/"this chat"), or a request that names its task itself
  (`metadata.task`, as Open WebUI's pipelines see it).

The answer is what the prompt asks for: a prompt that asks for JSON with a key gets a JSON object
with that key, the model's own when it wrote one, else an empty default the client accepts
(`{"tags": ["General"]}`, `{"follow_ups": []}`, a title from the first words of the chat).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

TASK_HEADER = re.compile(r"^\s*#{2,4}\s*task\s*:", re.IGNORECASE)
"""Open WebUI's templates all begin `### Task:`."""
TEMPLATE_PARTS = re.compile(
    r"<chat_history>|#{2,4}\s*\**output|json format|<text>|<type>", re.IGNORECASE
)
"""...and carry an output section or the chat history they work on."""
OUTPUT_HEADING = re.compile(r"#{2,4}\s*\**output", re.IGNORECASE)
JSON_KEY = re.compile(r"\{\s*\"(\w+)\"\s*:")
"""The first key of the JSON object a prompt shows as its output."""
TITLE_ASK = re.compile(
    r"\b(title|name|topic)\b[^.\n]{0,120}\b(the conversation|this conversation|chat history|"
    r"chat records|the dialogue)\b"
    r"|\b(conversation|chat)\b[^.\n]{0,40}\b(title|name)\b[^.\n]{0,40}"
    r"\b(\d+|five|ten)[- ]words?\b",
    re.IGNORECASE,
)
"""Other clients' title prompts: "a concise, 5-word-or-less title for the conversation"
(LibreChat), "give this conversation a name" (Chatbox), "summarize the conversation as a topic
name" (LobeChat)."""
ASKS_TO_WRITE = re.compile(
    r"\b(generate|write|give|create|suggest|provide|summari[sz]e)\b", re.IGNORECASE
)
KINDS = {
    "title": "title",
    "tags": "tags",
    "follow_ups": "follow-ups",
    "queries": "queries",
    "text": "autocompletion",
    "prompt": "image prompt",
    "tool_calls": "tool choice",
}
DEFAULTS: dict[str, Any] = {
    "tags": ["General"],
    "follow_ups": [],
    "queries": [],
    "text": "",
    "tool_calls": [],
}
"""What a client gets when the model wrote no usable JSON: each means "nothing to add" to it."""
TITLE_WORDS = 5
CHAT_HISTORY = re.compile(r"<chat_history>.*?</chat_history>", re.S)
HISTORY_LINE = re.compile(r"^[^\S\n]*(user|human)\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
"""White space but no line break before the speaker: a start that could cross line breaks made
every blank line a start that scans all those after it (quadratic: half a second for 8,000
newlines, issue 38)."""


@dataclass(frozen=True)
class Chore:
    """A recognised housekeeping request: what it is, and the JSON key its answer needs."""

    kind: str
    """"title", "tags", "follow-ups", ...: said in the routing reason."""
    key: str | None = None
    """The JSON object's key the client parses (None: it wants plain text)."""

    @property
    def reason(self) -> str:
        return f"client housekeeping: {self.kind}"


def recognise(text: str, has_history: bool, body: dict[str, Any] | None = None) -> Chore | None:
    """The chore this request is, or None for a person's message."""
    if has_history:
        return None
    metadata = (body or {}).get("metadata")
    named = metadata.get("task") if isinstance(metadata, dict) else None
    if TASK_HEADER.match(text) and TEMPLATE_PARTS.search(text):
        key = _output_key(text)
        return Chore(KINDS.get(key or "", key or "task"), key)
    if isinstance(named, str) and named:
        key = _output_key(text)
        return Chore(named.removesuffix("_generation").replace("_", "-"), key)
    head = text[:600]
    if TITLE_ASK.search(head) and ASKS_TO_WRITE.search(head):
        return Chore("title", _output_key(text))
    return None


def _output_key(text: str) -> str | None:
    """The key of the JSON object the prompt shows under its output heading (else the first
    one it shows at all), when it asks for JSON."""
    if "json" not in text.lower():
        return None
    heading = OUTPUT_HEADING.search(text)
    found = (JSON_KEY.search(text, heading.end()) if heading else None) or JSON_KEY.search(text)
    return found.group(1) if found else None


def answer(chore: Chore, reply: str, prompt: str) -> str:
    """The reply as the client needs it: JSON with the key its prompt asked for, when it
    asked for JSON; the model's own object when it wrote one, else an empty default."""
    if chore.key is None:
        return _plain_title(reply, prompt) if chore.kind == "title" else reply.strip()
    template = _without_history(prompt)
    for found in _json_objects(reply):
        # a model that repeats the prompt's own example ({"title": "your concise title
        # here"}) has not answered: that object is not taken for the answer
        if chore.key in found and not _echoed(found[chore.key], template):
            return json.dumps(found, ensure_ascii=False)
    if chore.key == "title":
        value: Any = _plain_title(reply if _looks_like_title(reply) else "", prompt)
    else:
        value = DEFAULTS.get(chore.key, "")
    return json.dumps({chore.key: value}, ensure_ascii=False)


def _without_history(prompt: str) -> str:
    """`CHAT_HISTORY.sub("", prompt)` in linear time: past the last closing tag no opening
    can match, and each of them would scan to the end for one."""
    last = prompt.rfind("</chat_history>")
    if last < 0:
        return prompt
    cut = last + len("</chat_history>")
    return CHAT_HISTORY.sub("", prompt[:cut]) + prompt[cut:]


def _json_objects(reply: str) -> Iterator[dict[str, Any]]:
    """The JSON objects in a reply (inside a code fence or after words, as models write)."""
    start = reply.find("{")
    while start != -1:
        try:
            found, _ = json.JSONDecoder().raw_decode(reply[start:])
        except ValueError:
            found = None
        if isinstance(found, dict):
            yield found
        start = reply.find("{", start + 1)


def _echoed(value: Any, template: str) -> bool:
    """A value the prompt itself shows (outside the chat it works on)."""
    if isinstance(value, str):
        return bool(value.strip()) and value in template
    if isinstance(value, list):
        return bool(value) and all(isinstance(v, str) and v in template for v in value)
    return False


def _looks_like_title(reply: str) -> bool:
    words = reply.split()
    return 0 < len(words) <= 8 and "\n" not in reply.strip()


def _plain_title(reply: str, prompt: str) -> str:
    """A short title: the model's, else the first words of the chat's first user line."""
    if _looks_like_title(reply):
        return reply.strip().strip("\"'“”").strip()
    history = prompt.partition("<chat_history>")[2] or prompt
    line = HISTORY_LINE.search(history)
    words = (line.group(2) if line else "").split()[:TITLE_WORDS]
    return " ".join(words).strip(" ?!.,:;\"'") or "New chat"
