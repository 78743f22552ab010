"""The per-login cap on Gradio events counts turns only (`limits.cap_page_turns`): a login with
its turns at the cap can still save a setting, and its page's refreshes never fill the cap.

On a busy machine the page's own timers and two quick saves filled `max_turns_per_user`, and
a voice setting was refused (429) and gone after a reload. Real Gradio Blocks and queue, its
push replaced by a recorder (no server)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import gradio as gr
import pytest
from fastapi import HTTPException

from assistant.limits import cap_page_turns, held_events


def _demo():
    def chat(text: str) -> str:
        return text

    def voice(text: str) -> str:
        return text

    def save_rate(text: str) -> None:
        return None

    def banner() -> str:
        return ""

    with gr.Blocks() as demo:
        box = gr.Textbox()
        box.submit(chat, box, box)
        box.change(voice, box, box)
        box.input(save_rate, box)
        gr.Timer(5).tick(banner, outputs=box)
    demo.queue()
    index = {fn.fn.__name__: i for i, fn in demo.fns.items()}
    return demo, index


def test_a_login_at_its_turn_cap_still_saves_settings_and_refreshes():
    demo, index = _demo()
    queue = demo._queue
    pushed: list[int] = []

    async def push(body, request, username):
        pushed.append(body.fn_index)
        return True, "event", "success"

    queue.push = push
    assert cap_page_turns(queue, 2)
    held = {"banner": 3, "save_rate": 2, "chat": 1, "voice": 1}  # ann's events in the queue
    for name, n in held.items():
        for k in range(n):
            event = SimpleNamespace(username="ann", fn=demo.fns[index[name]])
            queue.event_ids_to_events[f"{name}-{k}"] = event
    queue.event_ids_to_events["bob"] = SimpleNamespace(username="bob", fn=demo.fns[index["chat"]])
    assert held_events(queue, "ann") == 2  # her two turns; refreshes and saves are not turns

    def join(name: str, user: str = "ann"):
        body = SimpleNamespace(fn_index=index[name], session_hash=None)
        return asyncio.run(queue.push(body=body, request=None, username=user))

    with pytest.raises(HTTPException) as refused:
        join("chat")  # a third turn: refused, naming the limit
    assert refused.value.status_code == 429 and "max_turns_per_user" in refused.value.detail
    with pytest.raises(HTTPException):
        join("voice")
    assert join("save_rate")[2] == "success"  # her setting is saved all the same
    assert join("banner")[2] == "success"  # and her page keeps refreshing
    assert join("chat", "bob")[2] == "success"  # another login is not held up
    assert pushed == [index["save_rate"], index["banner"], index["chat"]]
