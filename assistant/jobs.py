"""Delegated jobs: queued in the store, run on the deep lane under a lease, preemptible.

A preempted or cut deep stream is not a failure: what it generated is saved, and the job asks
for the deep lane again and continues from there. Nothing a job finished is ever thrown away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from assistant import limits
from assistant.engine.client import Engine
from assistant.engine.generation import PREEMPTED, Generation
from assistant.engine.lanes import LaneScheduler
from assistant.errors import AssistantError, BadInput, Busy, EngineUnavailable
from assistant.prompting.guard import withhold
from assistant.prompting.prompt import Prompts
from assistant.records import CRASHED, CUT, INCOMPLETE, Job, Reply
from assistant.settings import Settings
from assistant.store.db import Store

log = logging.getLogger(__name__)

LEASE_S = 30.0
HEARTBEAT_S = 1.0
"""Progress is saved this often: what the Jobs panel shows is at most about a second old."""
MAX_ATTEMPTS = 5
MAX_BUDGET = 131072


def worker_is_dead(worker_id: str) -> bool:
    """A lease holder on this host whose process is gone (it crashed or was killed)."""
    host, _, rest = worker_id.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's worker: only its lease expiry tells
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class JobQueue:
    """Creating, listing, cancelling and retrying jobs. The store is the queue."""

    def __init__(
        self, store: Store, settings: Settings, fits: Callable[[str, int], object] | None = None
    ):
        self.store = store
        self.settings = settings
        self.fits = fits
        """Checks that a job's text and budget fit the engine's context window (raises
        ContextFull), where the engine is known here; else the worker finds out."""
        self.wake = asyncio.Event()
        self.inline_running: dict[str, int] = {}
        """Each login's inline deep answers running in this process."""

    @contextlib.contextmanager
    def inline(self, owner: str) -> Iterator[None]:
        """An inline deep answer (`/v1` with high effort, `chat --deep`) counts as one of the
        login's jobs while it runs (`max_jobs_per_user`); refused (Busy) past the limit."""
        self._check_room(owner)
        self.inline_running[owner] = self.inline_running.get(owner, 0) + 1
        try:
            yield
        finally:
            self.inline_running[owner] -= 1
            if not self.inline_running[owner]:
                del self.inline_running[owner]

    def submit(
        self,
        owner: str,
        prompt: str,
        *,
        key: str | None = None,
        conversation_id: str | None = None,
        budget: int | None = None,
    ) -> Job:
        """Store a queued job before any engine call; the same key gives back the same job.

        The prompt is capped like typed text (`max_text_chars`): a job's text can be made
        from the conversation ("now the same for Berlin", a "yes" to an offer), and a client's
        history is not typed text, so it could otherwise carry megabytes to the engine."""
        limit = self.settings.max_text_chars
        if len(prompt) > limit:
            raise BadInput(
                f"the job's text is too long ({len(prompt)} characters with what it refers "
                f"back to; the limit is {limit}, max_text_chars)"
            )
        if self.fits is not None:  # refused now, naming the limit, not failed later
            self.fits(prompt, budget or self.settings.deep.max_tokens)
        if not (key and any(j.idempotency_key == key for j in self.store.jobs(owner))):
            self._check_room(owner)
        job, _ = self.store.create_job(
            owner,
            prompt,
            budget or self.settings.deep.max_tokens,
            idempotency_key=key,
            conversation_id=conversation_id,
        )
        self.wake.set()
        return job

    def _check_room(self, owner: str) -> None:
        active = self.store.active_job_count(owner) + self.inline_running.get(owner, 0)
        why = limits.jobs_refusal(active, self.settings.max_jobs_per_user)
        # a job's result is stored text too: not started for a login over its disk
        why = why or limits.disk_refusal(self.settings, owner, self.store.disk_bytes)
        if why is not None:
            raise Busy(why)

    def get(self, job_id: str, owner: str | None = None) -> Job | None:
        """The job, or None if there is none (or it is another owner's)."""
        job = self.store.job(job_id)
        return job if job is not None and owner in (None, job.owner) else None

    def owned(self, owner: str, limit: int = 100) -> list[Job]:
        return self.store.jobs(owner, limit=limit)

    def take_ended(self, owner: str) -> list[Job]:
        """`owner`'s jobs that ended and were not yet announced; each is announced once."""
        ended = self.store.unnotified(owner)
        for job in ended:
            self.store.mark_notified(job.id)
        return ended

    def cancel(self, job_id: str, owner: str | None = None) -> bool:
        return self.store.cancel_job(job_id, owner)

    def retry(self, job_id: str, owner: str | None = None, *, bigger: bool = True) -> Job:
        job = self.store.job(job_id)
        if job is None or (owner is not None and job.owner != owner):
            raise AssistantError(f"no job {job_id}")
        budget = min(MAX_BUDGET, job.budget * 2) if bigger else job.budget
        if job.state in ("failed", "cancelled"):  # a retry is a new job for the login's limit
            self._check_room(job.owner)
        if not self.store.requeue(job_id, budget=budget, result="", reasoning="", attempts=0):
            raise AssistantError(
                f"job {job_id} is {job.state}; only failed or cancelled jobs retry"
            )
        self.wake.set()
        return self.store.job(job_id)  # type: ignore[return-value]


@dataclass
class Progress:
    """What a running job has produced so far (saved at each heartbeat)."""

    reply: Reply = field(default_factory=Reply)
    started: float = field(default_factory=time.monotonic)

    @property
    def result(self) -> str:
        return self.reply.content

    @property
    def reasoning(self) -> str:
        return self.reply.reasoning

    @property
    def tokens(self) -> int:
        return self.reply.content_tokens + self.reply.reasoning_tokens


class JobWorker:
    """Runs queued jobs on the deep lane, as many at once as the scheduler lets through."""

    def __init__(
        self,
        *,
        store: Store,
        engine: Engine,
        scheduler: LaneScheduler,
        prompts: Prompts,
        queue: JobQueue,
        settings: Settings,
    ):
        self.store = store
        self.engine = engine
        self.scheduler = scheduler
        self.prompts = prompts
        self.queue = queue
        self.settings = settings
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.tasks: set[asyncio.Task] = set()
        self.crashes = 0
        """Engine crashes that interrupted this worker's jobs (each job resumed)."""

    async def serve(self, poll_s: float = 1.0) -> None:
        """Claim and run jobs until cancelled; running jobs are cancelled with it."""
        self.store.recover_running(worker_is_dead)
        try:
            while True:
                # the app's inline deep answers take places of the deep cap too
                while len(self.tasks) + self.scheduler.peer_deep < self.scheduler.deep_max:
                    job = self.store.claim_job(self.worker_id, LEASE_S)
                    if job is None:
                        break
                    task = asyncio.create_task(self.run(job), name=f"job-{job.id}")
                    self.tasks.add(task)
                    task.add_done_callback(self._ended)
                self.queue.wake.clear()
                # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that lands
                # as the wake fires (a job just ended), and the worker never stopped
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(poll_s):
                        await self.queue.wake.wait()
        finally:
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)

    def _ended(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        # a slot is free: the next queued job starts now, not at the next poll (with deep
        # jobs of a few seconds, waiting for the poll left the deep lane idle a third of the time)
        self.queue.wake.set()

    async def run_by_id(self, job_id: str) -> Job:
        """Claim one job and run it here (`assistant delegate --wait` with no app running)."""
        job = self.store.claim_job(self.worker_id, LEASE_S, job_id=job_id)
        if job is not None:
            await self.run(job)
        return self.store.job(job_id)  # type: ignore[return-value]

    async def run(self, job: Job) -> None:
        progress = Progress(Reply(content=job.result, reasoning=job.reasoning))
        progress.reply.content_tokens = job.answer_tokens
        progress.reply.reasoning_tokens = job.reasoning_tokens
        progress.started -= job.elapsed_s

        def segment_ended(finish: str | None) -> None:
            self.crashes += finish == CRASHED
            self._save(job, progress)  # a preempted stretch's words are kept at once

        answer = Generation(
            self.engine,
            self.scheduler,
            self.settings.deep,
            lambda partial: self.prompts.deep(job.prompt, partial=partial),
            progress.reply,  # continues the answer kept so far
            budget=job.budget,
            owner=job.owner,  # logins take turns on the deep lane too
            on_segment=segment_ended,
        )
        try:
            try:
                finish = await self._generate(answer, job, progress)
            except EngineUnavailable as e:
                self._save(job, progress)
                if job.attempts >= MAX_ATTEMPTS:
                    self._end(job, progress, "failed", error=str(e))
                else:  # back to the queue; another attempt after a pause
                    await asyncio.sleep(min(30.0, 2.0 * job.attempts))
                    self.store.finish_job(job.id, self.worker_id, "queued")
                return
            if finish == "cancelled":
                return
            if finish == "length" and not progress.result.strip():
                self._end(
                    job,
                    progress,
                    "failed",
                    error=f"budget exhausted: {job.budget} tokens went on reasoning and no "
                    "answer came; the reasoning is kept; retry with a bigger budget",
                )
            elif not progress.result.strip() and finish not in (*INCOMPLETE, PREEMPTED):
                # the engine said it had finished, but no answer came: never an empty success
                what = (
                    "the model's output was all reasoning (it never closed its thinking)"
                    if progress.reasoning.strip()
                    else "the engine returned an empty answer"
                )
                self._end(
                    job,
                    progress,
                    "failed",
                    error=f"no answer: {what}; the reasoning is kept; retry the job",
                )
            elif finish in INCOMPLETE or finish == PREEMPTED:
                self._end(job, progress, "failed", error=f"the stream kept ending early ({finish})")
            else:
                if finish == "length":
                    progress.reply.content += (
                        f"\n\n*(stopped at the budget of {job.budget} tokens)*"
                    )
                self._end(job, progress, "done")
        except asyncio.CancelledError:
            # the app is stopping: save progress and hand the job back to the queue
            self._save(job, progress)
            self.store.finish_job(job.id, self.worker_id, "queued")
            raise
        except AssistantError as e:
            self._end(job, progress, "failed", error=str(e))
        except Exception as e:  # a bug must not leave the job running forever
            log.exception("job %s crashed", job.id)
            self._end(job, progress, "failed", error=f"internal error: {e}")

    async def _generate(self, answer: Generation, job: Job, progress: Progress) -> str | None:
        """The answer's finish reason, or "cancelled" when the job stopped being ours."""
        gen = asyncio.create_task(_finish_of(answer))
        beat = asyncio.create_task(self._heartbeat(job, progress))
        try:
            done, _ = await asyncio.wait({gen, beat}, return_when=asyncio.FIRST_COMPLETED)
            return gen.result() if gen in done else "cancelled"
        finally:
            for task in (gen, beat):
                task.cancel()
            await asyncio.gather(gen, beat, return_exceptions=True)

    async def _heartbeat(self, job: Job, progress: Progress) -> None:
        """Keep the lease; returns when the job is no longer ours (cancelled)."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            if not self._save(job, progress):
                return

    def _save(self, job: Job, progress: Progress) -> bool:
        return self.store.heartbeat(
            job.id,
            self.worker_id,
            LEASE_S,
            # what is stored (and shown) never repeats the delegate prompt; the stream is
            # not filtered as it runs, so a preempted job keeps every word it generated
            result=withhold(progress.result, self.prompts.delegate),
            reasoning=withhold(progress.reasoning, self.prompts.delegate),
            answer_tokens=progress.reply.content_tokens,
            reasoning_tokens=progress.reply.reasoning_tokens,
            elapsed_s=round(time.monotonic() - progress.started, 2),
        )

    def _end(self, job: Job, progress: Progress, state: str, error: str | None = None) -> None:
        self.store.finish_job(
            job.id,
            self.worker_id,
            state,
            # what is stored (and shown) never repeats the delegate prompt; the stream is
            # not filtered as it runs, so a preempted job keeps every word it generated
            result=withhold(progress.result, self.prompts.delegate),
            reasoning=withhold(progress.reasoning, self.prompts.delegate),
            answer_tokens=progress.reply.content_tokens,
            reasoning_tokens=progress.reply.reasoning_tokens,
            elapsed_s=round(time.monotonic() - progress.started, 2),
            error=error,
        )


async def _finish_of(answer: Generation) -> str | None:
    async with contextlib.aclosing(answer.events()) as events:
        async for ev in events:
            if ev.kind == "finish":
                return ev.finish_reason
    return CUT
