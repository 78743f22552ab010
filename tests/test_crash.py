"""Kill the process with SIGKILL mid-write and mid-job; nothing committed is lost."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from assistant.engine.lanes import LaneScheduler
from assistant.jobs import JobQueue, JobWorker
from assistant.prompting.prompt import Prompts
from assistant.store.db import Store
from tests.conftest import sim_engine, sim_settings
from tests.simengine_proc import run_simengine
from tests.waiting import until, wait_until

REPO = Path(__file__).resolve().parent.parent

WRITER = """
import sys
from pathlib import Path
from assistant.records import Timings, TurnResult
from assistant.store.db import Store
store = Store(Path(sys.argv[1]))
cid = store.new_conversation("ann")
i = 0
while True:
    store.add_turn(cid, f"q{i}", TurnResult("r" * 2000, "chat", "x", "stop", Timings(ttft=1.0)))
    i += 1
    print(i, flush=True)
"""


def test_sigkill_mid_write_keeps_every_committed_turn(tmp_path):
    db = tmp_path / "a.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    committed = 0
    assert proc.stdout is not None
    while committed < 200:
        committed = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = Store(db)
    assert store.integrity_ok()
    (cid,) = [row[0] for row in store.db.execute("SELECT id FROM conversations")]
    turns = store.turns(cid)
    assert len(turns) >= committed  # every turn reported committed is there
    assert [u for u, _ in turns[:committed]] == [f"q{i}" for i in range(committed)]


def _env(url: str, data: Path) -> dict[str, str]:
    return dict(os.environ, ASSISTANT_ENGINE_URL=url, ASSISTANT_DATA_DIR=str(data))


async def test_sigkill_mid_job_then_restart_finishes_every_job(tmp_path, settings):
    # a slow engine so the jobs are surely mid-stream when the process dies
    with run_simengine("--token-ms", "30", "--answer-words", "300") as url:
        env = _env(url, tmp_path)
        queued = subprocess.run(
            [sys.executable, "-m", "assistant.cli", "delegate", "--no-wait", "--json", "later"],
            env=env, capture_output=True, text=True, cwd=tmp_path, check=True,
        )  # fmt: skip
        later = json.loads(queued.stdout)["id"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "assistant.cli", "delegate", "--wait", "--json", "now"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        )  # fmt: skip
        store = Store(tmp_path / "assistant.db")
        running = wait_until(
            lambda: [j for j in store.jobs() if j.state == "running" and j.answer_tokens > 5],
            60,
            "the job to start and save progress",
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        partial = store.job(running[0].id)
        assert partial.state == "running" and partial.result  # progress was saved

        # restart: a new worker recovers the dead process's job and runs everything queued
        s = sim_settings(settings, url)  # its data dir is this test's tmp_path too
        worker = JobWorker(
            store=store,
            engine=sim_engine(url),
            scheduler=LaneScheduler(deep_max_in_flight=2),
            prompts=Prompts.load(),
            queue=JobQueue(store, s),
            settings=s,
        )
        serving = asyncio.create_task(worker.serve(poll_s=0.1))
        try:
            await until(
                lambda: all(j.state == "done" for j in store.jobs()), 60, "every job to finish"
            )
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        jobs = {j.id: j for j in store.jobs()}
        assert store.integrity_ok()
        assert set(jobs) == {running[0].id, later}  # no job lost
        assert all(j.state == "done" for j in jobs.values()), [j.state for j in jobs.values()]
        resumed = jobs[running[0].id]
        assert resumed.result.startswith(partial.result)  # the work done before the kill kept
        assert resumed.attempts >= 2
