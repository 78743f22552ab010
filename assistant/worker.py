"""`assistant worker`: delegated jobs in a process of their own, out of the chat lane's loop.

A deep job streams thousands of chunks; parsed on the web process's event loop they made a chat
turn's first token wait its turn behind them (issue 25: chat p95 of 3 s on vLLM while vLLM itself
answered in 0.18 s). So `assistant serve` starts this worker as a child process and supervises
it (`WorkerProcess`): restarted with bounded backoff if it dies alone, and it ends with the app
(the link closes when the app's process does, even on `kill -9`). The store is the queue and
carries progress, so the web process only reads it.

One socket joins the two processes (`worker_wire.Wire`, newline-delimited JSON):
- app -> worker: `{"wake": 1}` a job was queued or retried; `{"chat": id, "on": bool}` a chat
  turn was admitted or ended; `{"deep": n}` the app's inline deep answers at the engine (they
  share `deep.max_in_flight` with the jobs);
- worker -> app: `{"ok": id}` room was made for that chat turn; `{"deep": n, "preempted": k}`
  deep requests at the engine, and how many times deep work yielded so far.
The worker mirrors each chat turn in its own `LaneScheduler`, so on a one-slot engine a chat turn
preempts deep work and holds it back exactly as it did when both shared a loop; the app waits
for the `ok` there (bounded) before its chat request goes out.

`assistant worker` run alone (no link) serves the store's queue for a machine of its own; then
start the app with `assistant serve --no-worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from assistant.datadir import UMASK
from assistant.engine.lanes import DeepCount, LaneScheduler, Ticket
from assistant.leftovers import Leftovers
from assistant.settings import Settings
from assistant.worker_wire import Hello, Wire, wire_of

if TYPE_CHECKING:
    from assistant.jobs import JobQueue
    from assistant.runtime import Runtime

log = logging.getLogger(__name__)

ROOM_WAIT_S = 2.0
"""How long a chat turn waits for the worker to make room on a one-slot engine; past it the
turn goes ahead (the engine preempts the deep request itself)."""
RESTART_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
STEADY_S = 60.0
"""A worker that ran this long before dying starts the backoff from its beginning again."""
STOP_GRACE_S = 15.0
"""How long a stopping worker gets to hand its jobs back to the queue before it is killed."""


class WorkerPeer:
    """The web process's view of the worker's scheduler (a `LanePeer`)."""

    def __init__(self, wait_for_room: bool):
        self.wait_for_room = wait_for_room
        self.deep_running = 0
        self.preemptions = 0
        """Deep requests the worker stopped or saw cut to make room, as it last said."""
        self.wire: Wire | None = None
        self.told = -1
        """The app's own deep requests, as last told to the worker."""
        self._ids = itertools.count(1)
        self._sent: dict[Ticket, int] = {}
        self._acks: dict[int, asyncio.Future[None]] = {}

    async def chat_started(self, ticket: Ticket) -> None:
        if self.wire is None:
            return  # no worker (starting, restarting): nothing of it to preempt
        key = next(self._ids)
        self._sent[ticket] = key
        if not self.wait_for_room:
            self.wire.send(chat=key, on=True)
            return
        ack = asyncio.get_running_loop().create_future()
        self._acks[key] = ack
        self.wire.send(chat=key, on=True)
        try:
            async with asyncio.timeout(ROOM_WAIT_S):  # not wait_for: it can swallow a cancel
                await ack
        except TimeoutError:
            log.warning("the job worker made no room for a chat turn within %.0f s", ROOM_WAIT_S)
        finally:
            self._acks.pop(key, None)

    def chat_ended(self, ticket: Ticket) -> None:
        key = self._sent.pop(ticket, None)
        if key is not None and self.wire is not None:
            self.wire.send(chat=key, on=False)

    def tell(self, deep: int) -> None:
        """The app's deep requests at the engine, when they changed."""
        if self.wire is not None and deep != self.told:
            self.told = deep
            self.wire.send(deep=deep)

    def handle(self, message: dict[str, Any]) -> None:
        if "ok" in message:
            ack = self._acks.get(message["ok"])
            if ack is not None and not ack.done():
                ack.set_result(None)
        elif "deep" in message:
            self.deep_running = int(message["deep"])
            self.preemptions = int(message.get("preempted", self.preemptions))

    def attach(self, wire: Wire | None) -> None:
        self.wire, self.told = wire, -1
        if wire is None:  # the worker is gone: so are its requests, and nobody will answer
            self.deep_running = 0
            for ack in self._acks.values():
                if not ack.done():
                    ack.set_result(None)
            self._sent.clear()


class WorkerProcess:
    """`assistant worker` as a supervised child of the web process, linked to its scheduler
    and job queue. `run()` is the supervising task; cancelling it stops the worker, which
    hands its running jobs back to the queue first."""

    def __init__(
        self,
        settings: Settings,
        scheduler: LaneScheduler,
        queue: JobQueue,
        *,
        embedded: bool,
        lanes: bool = True,
        deep_max: int | None = None,
    ):
        if deep_max is not None:
            settings = replace(settings, deep_max_in_flight=deep_max)
        self.hello = Hello(settings, embedded=embedded, lanes=lanes)
        self.scheduler = scheduler
        self.queue = queue
        self.peer = WorkerPeer(wait_for_room=scheduler.slots is not None)
        self.leftovers = Leftovers(settings.data_dir)
        """Where its pid is recorded, so a next start ends it if the app was killed."""
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.ready = asyncio.Event()
        """Set while a worker is linked."""

    async def run(self) -> None:
        self.scheduler.peer = self.peer
        attempt = 0
        try:
            while True:
                started = time.monotonic()
                try:
                    code = await self._once()
                except (OSError, ValueError, EOFError) as e:  # it could not start or link
                    code = f"it failed: {e!r}"
                attempt = 0 if time.monotonic() - started > STEADY_S else attempt + 1
                delay = RESTART_DELAYS_S[min(attempt, len(RESTART_DELAYS_S) - 1)]
                log.error("the job worker ended (%s); restarting it in %.1f s", code, delay)
                await asyncio.sleep(delay)
        finally:
            self.scheduler.peer = None

    async def _once(self) -> str:
        """Start one worker and serve its link until it ends; how it ended."""
        ours, theirs = socket.socketpair()
        wire: Wire | None = None
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "assistant.cli", "worker", "--link-fd", str(theirs.fileno()),
                pass_fds=(theirs.fileno(),),
                # a session, so a scheduling group, of its own: under Linux's autogroup a
                # latency-bound process sharing a session with a CPU-hungry one was measured
                # stalling for up to 2.8 s at a time, and for at most 11 ms in its own. Not
                # niced: on a one-slot engine a chat turn waits for the worker to let go
                start_new_session=True,
            )  # fmt: skip
            theirs.close()
            await asyncio.to_thread(self.leftovers.add_process, self.proc.pid, "job worker")
            self.starts += 1
            wire = await wire_of(ours)
            wire.writer.write(self.hello.encode())
            self.peer.attach(wire)
            deep = self.scheduler.running["deep"]
            self.scheduler.on_change = lambda: self.peer.tell(len(deep))
            self.peer.tell(len(deep))
            self.ready.set()
            wakes = asyncio.create_task(self._forward_wakes(wire))
            try:
                async for message in wire.messages():
                    self.peer.handle(message)
                    if "deep" in message:  # an inline deep answer waiting for room
                        await self.scheduler.recount()
            finally:
                self.scheduler.on_change = None
                wakes.cancel()
                await asyncio.gather(wakes, return_exceptions=True)
            return _exit(await self.proc.wait())
        finally:
            self.ready.clear()
            self.peer.attach(None)
            theirs.close()
            if wire is not None:
                await wire.close()
            else:
                ours.close()
            try:
                await self._reap()
            finally:
                if self.proc is not None:
                    self.leftovers.forget_process(self.proc.pid)  # a line in a file: quick

    async def _forward_wakes(self, wire: Wire) -> None:
        # a job queued in this process starts at once, not at the worker's next poll
        while True:
            await self.queue.wake.wait()
            self.queue.wake.clear()
            wire.send(wake=1)

    async def _reap(self) -> None:
        """After the link closed: the worker hands its jobs back and exits; bounded."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_GRACE_S)
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise


def worker_process(
    rt: Runtime, *, lanes: bool = True, deep_max: int | None = None
) -> WorkerProcess:
    """The job worker as a child process linked to `rt`'s lanes and queue, on `rt`'s engine
    (the embedded one too: the child attaches to it, never starts one)."""
    settings = replace(
        rt.settings,
        engine_url=rt.base_url,
        engine_kind=rt.info.kind,
        model=rt.engine.model or rt.settings.model,
    )
    return WorkerProcess(
        settings,
        rt.scheduler,
        rt.jobs,
        embedded=rt.embedded is not None,
        lanes=lanes,
        deep_max=deep_max,
    )


def _exit(code: int) -> str:
    return f"exit code {code}" if code >= 0 else f"killed by {signal.Signals(-code).name}"


class ChatMirror:
    """The worker's copy of the app's chat turns: each holds a chat ticket in this process's
    scheduler from `on` to `off`, and says `ok` once admitted (room made)."""

    def __init__(self, scheduler: LaneScheduler, wire: Wire):
        self.scheduler = scheduler
        self.wire = wire
        self.turns: dict[int, tuple[asyncio.Task, asyncio.Event]] = {}

    def update(self, key: int, on: bool) -> None:
        if on:
            done = asyncio.Event()
            task = asyncio.create_task(self._hold(key, done), name=f"chat-{key}")
            self.turns[key] = (task, done)
            task.add_done_callback(lambda _: self.turns.pop(key, None))
        elif key in self.turns:
            task, done = self.turns[key]
            done.set()
            task.cancel()  # still waiting for admission: it never needs it now

    async def _hold(self, key: int, done: asyncio.Event) -> None:
        async with self.scheduler.admit("chat"):
            self.wire.send(ok=key)
            await done.wait()

    async def close(self) -> None:
        tasks = [task for task, _ in self.turns.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def serve_linked(fd: int) -> None:
    """The linked worker: settings from the app, jobs until the app closes the link."""
    from assistant.runtime import Runtime

    wire = await wire_of(socket.socket(fileno=fd))
    hello = Hello.decode(await wire.reader.readline())
    rt = await asyncio.to_thread(Runtime, hello.settings, start_engine=False,
                                 engine_is_embedded=hello.embedded)  # fmt: skip
    try:
        await _serve(rt, wire, hello.lanes)
    finally:
        await asyncio.to_thread(rt.close)
        await wire.close()


async def _serve(rt: Runtime, wire: Wire, lanes: bool) -> None:
    rt.scheduler.enabled = lanes
    rt.scheduler.peer = app = DeepCount()
    mirror = ChatMirror(rt.scheduler, wire)
    reported = (-1, -1)

    def report() -> None:
        nonlocal reported
        now = (len(rt.scheduler.running["deep"]), rt.scheduler.stats["deep"].preemptions)
        if now != reported:
            reported = now
            wire.send(deep=now[0], preempted=now[1])

    rt.scheduler.on_change = report

    async def follow() -> None:
        async for message in wire.messages():
            if "wake" in message:
                rt.jobs.wake.set()
            elif "chat" in message:
                mirror.update(int(message["chat"]), bool(message.get("on")))
            elif "deep" in message:  # the app's inline deep answers: room for jobs changed
                app.deep_running = int(message["deep"])
                await rt.scheduler.recount()
                rt.jobs.wake.set()

    serving = asyncio.create_task(rt.worker().serve(), name="job-worker")
    following = asyncio.create_task(follow(), name="link")
    try:
        # the link closed (the app is stopping, or died) or the worker failed
        await asyncio.wait({serving, following}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done() and not serving.cancelled() and serving.exception() is not None:
            log.error("the job worker stopped: %r", serving.exception())
    finally:
        # running jobs are handed back to the queue with their progress
        for task in (serving, following):
            task.cancel()
        await asyncio.gather(serving, following, return_exceptions=True)
        await mirror.close()


def end_with_the_app() -> None:
    """A linked worker ends with the app even if the link's end were somehow kept open."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def run_worker(settings: Settings, link_fd: int | None) -> int:
    """`assistant worker`: until the link closes (linked) or a stop signal (alone)."""
    if link_fd is not None:
        end_with_the_app()
    os.umask(UMASK)  # what it writes is its user's alone, as the app's is (issue 49)

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        if link_fd is not None:
            await serve_linked(link_fd)
            return
        from assistant.runtime import Runtime

        with Runtime(settings) as rt:
            if rt.notice:
                print(rt.notice, file=sys.stderr)
            await rt.worker().serve()  # until a stop signal

    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(main())
    return 0
