"""Gradio's queue, woken by work instead of polling for it.

Gradio 6.31's `Queue.start_processing` looks for work every `sleep_when_free` even when there
is none: at its default (1 ms) a thousand wake-ups a second, at the app's 5 ms two hundred,
for an app that mostly waits (it runs 24/7). `wake_on_work` replaces that loop on the one
queue instance with the same loop that, when there is nothing to start, waits for an event
set by what can give it something to do: a push (a new event) or an event's end (a free
worker slot). An event that arrives starts at once instead of at the next poll. A backstop
timeout keeps the loop looking now and then, should work arrive some other way.

The loop below is Gradio's own (pinned, 6.31) with only its idle waits changed; a test checks
that the attributes it uses still exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

log = logging.getLogger(__name__)

BACKSTOP_S = 0.5
"""The longest the idle loop waits without being woken before it looks anyway."""
USES = (
    "push", "start_processing", "process_events", "get_events", "delete_lock", "active_jobs",
    "event_queue_per_concurrency_id", "event_analytics", "_asyncio_tasks", "live_updates",
    "broadcast_estimations", "stopped", "sleep_when_free", "_cancel_asyncio_tasks",
)  # fmt: skip
"""What the loop uses of Gradio's Queue: all must exist, or the queue is left as it is."""


def wake_on_work(queue: Any) -> bool:
    """Install the woken loop on `queue` (before the server starts it); False if Gradio's
    Queue is not the one this was written for (then it keeps polling)."""
    missing = [name for name in USES if not hasattr(queue, name)]
    if missing:
        log.warning("Gradio's queue lacks %s; it keeps polling for work", ", ".join(missing))
        return False
    from gradio.utils import run_coro_in_background, set_task_name

    work = asyncio.Event()
    push = queue.push

    async def pushed(*args: Any, **kwargs: Any) -> Any:
        try:
            return await push(*args, **kwargs)
        finally:
            work.set()

    async def run_and_wake(*args: Any) -> None:
        try:
            await queue.process_events(*args)
        finally:
            work.set()  # a worker slot is free again

    async def idle() -> None:
        work.clear()
        if len(queue) == 0 or None not in queue.active_jobs:  # still nothing to start
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(BACKSTOP_S):
                    await work.wait()

    async def start_processing() -> None:
        try:
            while not queue.stopped:
                if len(queue) == 0 or None not in queue.active_jobs:
                    await idle()
                    continue

                # Using mutex to avoid editing a list in use
                async with queue.delete_lock:
                    event_batch = queue.get_events()

                if event_batch:
                    events, batch, concurrency_id = event_batch
                    queue.active_jobs[queue.active_jobs.index(None)] = events
                    event_queue = queue.event_queue_per_concurrency_id[concurrency_id]
                    event_queue.current_concurrency += 1
                    start_time = time.time()
                    fn = events[0].fn
                    event_queue.start_times_per_fn[fn].add(start_time)
                    for event in events:
                        if (a := queue.event_analytics.get(event._id)) is not None:
                            a["status"] = "processing"
                    task = run_coro_in_background(run_and_wake, events, batch, start_time, fn)
                    set_task_name(task, events[0].session_hash, fn._id, events[0]._id, batch)
                    queue._asyncio_tasks.add(task)
                    task.add_done_callback(queue._asyncio_tasks.discard)
                    if queue.live_updates:
                        queue.broadcast_estimations(concurrency_id)
                else:
                    # events wait, but none may start (a concurrency limit): as Gradio does
                    await asyncio.sleep(queue.sleep_when_free)
        finally:
            queue.stopped = True
            queue._cancel_asyncio_tasks()

    queue.push = pushed
    queue.start_processing = start_processing
    return True
