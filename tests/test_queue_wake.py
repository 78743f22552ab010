"""Gradio's queue woken by work (`web.page.queue_wake`): events still run, at once, and an idle
queue does not look for work over and over."""

from __future__ import annotations

import time

import pytest


@pytest.mark.process
def test_the_woken_queue_runs_events_and_rests_when_idle() -> None:
    import gradio as gr
    from gradio_client import Client

    from assistant.web.page.queue_wake import USES, wake_on_work

    with gr.Blocks() as demo:
        box = gr.Textbox()
        out = gr.Textbox()
        box.submit(lambda t: t.upper(), box, out, api_name="shout")
    demo.queue()
    queue = demo._queue
    assert all(hasattr(queue, name) for name in USES)  # the pinned Gradio's Queue
    assert wake_on_work(queue)
    looked: list[int] = []  # each look for work asks the queue's length first
    base = type(queue)

    class Counting(base):  # type: ignore[misc, valid-type]
        def __len__(self) -> int:
            looked.append(1)
            return base.__len__(self)

    queue.__class__ = Counting
    demo.launch(prevent_thread_lock=True, quiet=True)
    try:
        client = Client(demo.local_url, verbose=False)
        assert [client.predict(f"hi {i}", api_name="/shout") for i in range(3)] == [
            "HI 0", "HI 1", "HI 2"
        ]  # fmt: skip
        before = len(looked)
        time.sleep(1.5)  # idle: polling every 5 ms, the loop would look 300 times
        assert len(looked) - before < 20
        assert client.predict("again", api_name="/shout") == "AGAIN"
    finally:
        demo.close()


def test_a_queue_it_was_not_written_for_is_left_polling() -> None:
    from assistant.web.page.queue_wake import wake_on_work

    class Other:
        push = None

    assert wake_on_work(Other()) is False
