"""Async-generator plumbing for the turn pipeline: run sources side by side, close them all.

`merge` is how two stages run at once (the answer's text streams to the page while its first
sentence is synthesized): each source runs in its own task, items come out as they are ready,
and closing the merged stream (barge-in, Stop, a client leaving) cancels and closes every
source, so nothing keeps generating.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")
_END = object()


async def merge(*sources: AsyncIterator[T]) -> AsyncIterator[T]:
    """Items of all `sources` as they come; ends when all end; re-raises a source's error."""
    queue: asyncio.Queue[tuple[object, BaseException | None]] = asyncio.Queue()

    async def pump(source: AsyncIterator[T]) -> None:
        error: BaseException | None = None
        try:
            async with contextlib.aclosing(source):  # type: ignore[type-var]
                async for item in source:
                    queue.put_nowait((item, None))
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # handed to the consumer, raised there
            error = e
        finally:
            queue.put_nowait((_END, error))

    tasks = [asyncio.create_task(pump(s), name="pipeline-stage") for s in sources]
    try:
        ended = 0
        while ended < len(tasks):
            item, error = await queue.get()
            if item is _END:
                ended += 1
                if error is not None:
                    raise error
                continue
            yield item  # type: ignore[misc]
    finally:
        await cancel_all(tasks)


async def cancel_all(tasks: list[asyncio.Task]) -> None:
    """Cancel every task and wait until each has ended.

    The cancel is repeated until it lands: on Python 3.11 `asyncio.wait_for` drops a
    cancellation that races the result it was waiting for, and a dropped cancel would leave
    the engine generating."""
    for task in tasks:
        task.cancel()
    pending = {t for t in tasks if not t.done()}
    try:
        while pending:
            _, pending = await asyncio.wait(pending, timeout=0.1)
            for task in pending:
                task.cancel()
    finally:
        for task in tasks:
            task.cancel()  # no-op on finished tasks; covers our own cancellation above
    await asyncio.gather(*tasks, return_exceptions=True)
