"""A deep job followed as a turn's stream (issue 31): the OpenAI endpoint answers a deep decision
in its own reply while the work runs as a job on the deep lane.

The job runs in the worker process like every other (stored, preemptible, resumed, in the Jobs
panel); this process only reads its row, which the worker saves about once a second, and turns
what grew since the last read into reasoning and content events. Closing the stream (a client
that left) stops the reading, never the job: its result stays in the Jobs panel, announced
there like any other job's. A job whose answer a client received is not announced again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from assistant.records import Job, TurnEvent, TurnResult, now_ms
from assistant.store.db import Store
from assistant.turns.recorder import Recorder

POLL_S = 0.25
"""How often the job's row is read: well under the worker's one-second progress saves."""
KEEPALIVE_S = 5.0
"""With nothing new for this long (queued, or a quiet stretch of thinking), a "waiting" event,
so a client's idle timeout does not cut the stream while the model thinks."""
ENDED = ("done", "failed", "cancelled")


async def follow(
    store: Store,
    job: Job,
    result: TurnResult,
    rec: Recorder,
    *,
    poll_s: float = POLL_S,
    keepalive_s: float = KEEPALIVE_S,
) -> AsyncIterator[TurnEvent]:
    """The job's reasoning and answer as they grow; `result` holds its end when it ended."""
    result.job_id = job.id
    yield TurnEvent("waiting", text=job.id)  # the reply can start: the job exists
    sent = {"content": job.result, "reasoning": job.reasoning}
    for kind in ("reasoning", "content"):  # a job resumed by its key shows what it had
        if sent[kind]:
            yield TurnEvent(kind, text=sent[kind])  # type: ignore[arg-type]
    quiet_since = time.monotonic()
    started = now_ms()
    while job.state not in ENDED:
        await asyncio.sleep(poll_s)
        row = await asyncio.to_thread(store.job, job.id)
        if row is None:  # deleted under us: nothing more will come
            break
        job = row
        grew = False
        for kind, text in (("reasoning", job.reasoning), ("content", job.result)):
            # the worker only appends; a text that changed otherwise (a withheld echo of the
            # prompt) is not taken back from the client, and the final reply settles it
            if len(text) > len(sent[kind]) and text.startswith(sent[kind]):
                rec.first("ttft")
                yield TurnEvent(kind, text=text[len(sent[kind]) :])  # type: ignore[arg-type]
                sent[kind], grew = text, True
        now = time.monotonic()
        if grew:
            quiet_since = now
        elif now - quiet_since >= keepalive_s:
            quiet_since = now
            yield TurnEvent("waiting", text=job.id)
    rec.set("llm_total", now_ms() - started)
    _settle(store, job, result)


def _settle(store: Store, job: Job, result: TurnResult) -> None:
    result.reply, result.reasoning = job.result, job.reasoning
    result.tokens = job.answer_tokens + job.reasoning_tokens
    if job.elapsed_s:
        result.tokens_per_s = round(result.tokens / job.elapsed_s, 1)
    if job.state == "done":
        result.finish_reason = "stop"
        store.mark_notified(job.id)  # the client has the answer: no notice in the page too
        return
    result.finish_reason = job.state
    result.incomplete = bool(job.result)
    result.error = job.error or f"the job was {job.state}"
    result.exhausted = "budget exhausted" in (job.error or "")
    if job.state in ENDED:
        store.mark_notified(job.id)  # the error is in this reply
