"""Delegated jobs in a worker process of their own (`assistant.worker`): the app's loop reads
only the store, the worker follows the app's lanes over its link, dies with the app and is
restarted when it dies alone."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from gradio_client import Client

from assistant.devtools import idlebench
from assistant.engine.lanes import LaneScheduler
from assistant.runtime import Runtime
from assistant.store.db import Store
from assistant.worker import ChatMirror, WorkerPeer, worker_process
from tests.app_proc import CLI_SERVE, app_env, run_app
from tests.conftest import sim_settings
from tests.simengine_proc import run_simengine, sim_requests
from tests.waiting import until, wait_until

pytestmark = pytest.mark.process


async def _served(rt: Runtime):
    child = worker_process(rt)
    task = asyncio.create_task(child.run())
    await until(lambda: child.ready.is_set(), 120, "the worker process to link")
    return child, task


async def _stop(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_job_runs_in_the_worker_process_with_batched_chunks(settings):
    # tokens slow enough that the job is seen running before it ends
    with (
        run_simengine("--token-ms", "10", "--kind", "vllm") as sim_url,
        Runtime(sim_settings(settings, sim_url)) as rt,
    ):
        child, task = await _served(rt)
        try:
            job = rt.jobs.submit("ann", "Summarize the history of tea.")
            # the app's loop ran no job: the worker process did (its pid holds the lease)
            await until(lambda: rt.store.job(job.id).state == "running", 30, "a claim")
            row = rt.store.db.execute("SELECT lease_owner FROM jobs WHERE id=?", (job.id,))
            assert f":{child.proc.pid}:" in row.fetchone()[0]
            done = await until(
                lambda: (j := rt.store.job(job.id)).state == "done" and j, 60, "the job to end"
            )
        finally:
            await _stop(task)
        body = sim_requests(sim_url)[-1]["body"]
    assert done.result and done.answer_tokens + done.reasoning_tokens > 16
    # the deep lane asks for batched chunks and the engine's running count of tokens
    assert body["stream_interval"] == settings.deep.stream_interval > 1
    assert body["stream_options"]["continuous_usage_stats"] is True


async def test_the_worker_counts_in_the_apps_depth_and_stops_with_it(settings):
    with run_simengine("--token-ms", "50", "--kind", "vllm") as slow:
        with Runtime(sim_settings(settings, slow)) as rt:
            child, task = await _served(rt)
            job = rt.jobs.submit("ann", "a slow task")
            await until(lambda: rt.scheduler.depth()["deep_running"] == 1, 30, "deep running")
            pid = child.proc.pid
            # a session, so a scheduling group, of its own
            assert os.getsid(pid) == pid
            await _stop(task)
            # the worker handed the job back to the queue, with its progress, and ended
            assert rt.store.job(job.id).state == "queued"
            assert child.proc.returncode is not None
            assert rt.scheduler.depth()["deep_running"] == 0
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


async def test_a_worker_that_dies_alone_is_restarted_and_its_job_resumes(settings):
    with run_simengine("--token-ms", "20", "--kind", "vllm") as slow:
        with Runtime(sim_settings(settings, slow)) as rt:
            child, task = await _served(rt)
            try:
                job = rt.jobs.submit("ann", "a task that outlives its worker")
                await until(
                    lambda: rt.store.job(job.id).reasoning_tokens > 0, 30, "progress stored"
                )
                child.proc.send_signal(signal.SIGKILL)
                await until(lambda: child.starts == 2 and child.ready.is_set(), 60, "a restart")
                done = await until(
                    lambda: (j := rt.store.job(job.id)).state == "done" and j, 120, "the job"
                )
            finally:
                await _stop(task)
    assert done.result


async def test_a_chat_turn_in_the_app_preempts_the_workers_deep_request():
    """On a one-slot engine: the worker's mirror of the app's chat turn takes the slot, so
    its deep request yields first and waits until the turn ends (the wire replaced by direct
    calls; the real one is in the tests above and in test_embedded)."""
    worker_side = LaneScheduler(deep_max_in_flight=1, slots=1)
    app_side = LaneScheduler(deep_max_in_flight=1, slots=1)
    sent: list[dict] = []

    class Loopback:
        """The link, in one process: each side's messages go straight to the other."""

        def __init__(self, deliver):
            self.deliver = deliver

        def send(self, **message):
            sent.append(message)
            asyncio.get_running_loop().call_soon(self.deliver, message)

    peer = WorkerPeer(wait_for_room=True)
    mirror = ChatMirror(worker_side, Loopback(peer.handle))  # type: ignore[arg-type]
    peer.wire = Loopback(lambda m: mirror.update(m["chat"], m["on"]))  # type: ignore[assignment]
    app_side.peer = peer
    async with worker_side.admit("deep") as deep:
        assert not deep.preempted.is_set()
        entered = asyncio.Event()

        async def chat() -> None:
            async with app_side.admit("chat"):
                entered.set()
                await asyncio.sleep(0.05)

        turn = asyncio.create_task(chat())
        await until(lambda: deep.preempted.is_set(), 5, "the deep request to be asked to yield")
        assert not entered.is_set(), "the chat turn went ahead while the deep request held the slot"
    # the deep request let go: now the chat turn has the slot
    await asyncio.wait_for(entered.wait(), 5)
    async with worker_side.admit("deep"):  # deep work waits for the chat turn to end
        assert turn.done()
    await turn
    assert [m.get("on") for m in sent if "chat" in m] == [True, False]
    await mirror.close()


APP = """
import asyncio, sys
from assistant.runtime import Runtime
from assistant.settings import load_settings
from assistant.worker import worker_process
from tests.conftest import sim_settings

async def main():
    s = sim_settings(load_settings(env={"ASSISTANT_DATA_DIR": sys.argv[1]}), sys.argv[2])
    with Runtime(s) as rt:
        child = worker_process(rt)
        task = asyncio.create_task(child.run())
        await child.ready.wait()
        print(child.proc.pid, flush=True)
        await task

asyncio.run(main())
"""


def test_the_worker_ends_when_the_app_is_killed(sim_url, tmp_path):
    """`kill -9` of the app: the worker sees its link close and ends (no orphan left)."""
    app = subprocess.Popen(
        [sys.executable, "-c", APP, str(tmp_path), sim_url],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert app.stdout is not None
        worker = int(app.stdout.readline())
        app.kill()
        app.wait()
        wait_until(lambda: not _alive(worker), 30, "the worker to end with the app")
    finally:
        app.kill()


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first, nice at 16)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    try:
        return _stat(pid)[0] != "Z"
    except OSError:
        return False


def test_a_worker_of_its_own_runs_the_jobs_of_an_app_started_without_one(sim_url, tmp_path):
    """`assistant serve --no-worker` beside `assistant worker` on the same store."""
    with run_app(tmp_path / "app", sim_url, "--no-worker", entry=CLI_SERVE) as app:
        assert "worker" not in idlebench.named_children(app.proc.pid)
        job = Client(app.url, verbose=False).predict("a task for elsewhere", api_name="/delegate")
        store = Store(app.data_dir / "assistant.db")
        worker = subprocess.Popen(
            [sys.executable, "-m", "assistant.cli", "worker"],
            env=app_env(app.data_dir, sim_url),
            cwd=app.data_dir,
        )
        try:
            assert store.job(job["id"]).state == "queued"  # nobody in the app runs it
            wait_until(lambda: store.job(job["id"]).state == "done", 60, "the worker to run it")
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0
        finally:
            worker.kill()
            store.close()
