"""Drive the page's own event handlers over HTTP, the way its JavaScript does.

`gradio_client` only reaches the named endpoints; the page's handlers (Send, the voice
recorder, the Jobs panel's Cancel/Retry) are "private", yet any browser (or attacker) can call
them by index through the queue. Tests use this to check what such calls can and cannot do.

    page = PageSession(app.url, auth=("ann", "pw"))
    out = page.call("cancel", job_id)          # -> Outcome(ok, data, error)
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from gradio_client.utils import apply_diff


@dataclass
class Outcome:
    """How one event ended: its outputs, or the error the page would show."""

    ok: bool
    data: list[Any]
    error: str | None = None
    status: int = 200
    """The HTTP status of joining the queue (503: the queue was full)."""


class PageSession:
    """One browser-like session: the login cookie, a session hash, the page's config."""

    def __init__(self, url: str, auth: tuple[str, str] | None = None, timeout: float = 120.0):
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout)
        if auth is not None:
            r = self.http.post("/login", data={"username": auth[0], "password": auth[1]})
            r.raise_for_status()
        self.config = self.http.get("/config").json()
        self.fns = {d["api_name"]: d for d in self.config["dependencies"]}
        self.session_hash = uuid.uuid4().hex[:12]

    def upload(self, data: bytes | Path, name: str = "audio.wav") -> dict[str, Any]:
        """Upload a file as the page does; returns the FileData to pass to a handler."""
        content = data.read_bytes() if isinstance(data, Path) else data
        r = self.http.post("/gradio_api/upload", files={"files": (name, content)})
        r.raise_for_status()
        path = r.json()[0]
        return {
            "path": path,
            "orig_name": name,
            "size": len(content),
            "meta": {"_type": "gradio.FileData"},
        }

    def call(self, api_name: str, *data: Any) -> Outcome:
        """Run one of the page's handlers (by its api_name in the config) to completion."""
        fn = self.fns[api_name]
        trigger = fn["targets"][0][0] if fn["targets"] else None
        r = self.http.post(
            "/gradio_api/queue/join",
            json={
                "data": list(data),
                "event_data": None,
                "fn_index": fn["id"],
                "trigger_id": trigger,
                "session_hash": self.session_hash,
            },
        )
        if r.status_code != 200:
            return Outcome(False, [], r.text, r.status_code)
        event_id = r.json()["event_id"]
        # a streaming handler sends its first outputs whole, then diffs; its last yield may
        # skip an output (`gr.skip()`), which then keeps the value it streamed
        sent: list[Any] | None = None  # as the server tracks it, to apply its diffs to
        shown: list[Any] = []  # what the page shows: skipped outputs keep their value
        with self.http.stream(
            "GET", "/gradio_api/queue/data", params={"session_hash": self.session_hash}
        ) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("event_id") != event_id:
                    continue
                output = msg.get("output") or {}
                data = output.get("data") or []
                if msg.get("msg") == "process_generating" and msg.get("success"):
                    sent = data if sent is None else _patch(sent, data)
                    shown = _keep(shown or [None] * len(sent), sent)
                elif msg.get("msg") == "process_completed":
                    if shown and len(shown) == len(data):
                        data = _keep(shown, data)
                    return Outcome(bool(msg.get("success")), data, _error(output))
        raise RuntimeError(f"the stream ended before {api_name} completed")

    def close(self) -> None:
        self.http.close()


def _patch(values: list[Any], diffs: list[Any]) -> list[Any]:
    return [apply_diff(v, d) for v, d in zip(values, diffs, strict=True)]


def _keep(old: list[Any], new: list[Any]) -> list[Any]:
    return [o if _skipped(n) else n for o, n in zip(old, new, strict=True)]


def _skipped(value: Any) -> bool:
    return isinstance(value, dict) and value == {"__type__": "update"}


def _error(output: dict[str, Any]) -> str | None:
    err = output.get("error")
    return None if err is None else str(err)


def chat_text(history: list[dict[str, Any]]) -> str:
    """All the text of a Chatbot value, for matching."""
    parts = []
    for message in history or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        for item in content if isinstance(content, list) else []:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append(item.get("text", ""))
    return "\n".join(parts)
