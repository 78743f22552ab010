"""The real embedded engine: llama.cpp's server process with the bundled Gemma 3 270M."""

from __future__ import annotations

import os

import httpx
import pytest

from assistant.engine.embedded import EmbeddedEngine
from assistant.runtime import Runtime
from assistant.turns.pipeline import TurnRequest
from tests.waiting import until

# one event loop for the module: the runtime's scheduler and queues belong to the loop that
# first uses them, as they do in the app (one server loop) and the CLI (one asyncio.run)
same_loop = pytest.mark.asyncio(loop_scope="module")
# under heavy CPU contention llama.cpp's threads slow down by an order of magnitude; these
# tests are allowed the time that takes rather than the suite's default limit
pytestmark = pytest.mark.timeout(1500)


def _runtime(tmp_path_factory, **env: str) -> Runtime:
    from dataclasses import replace

    from assistant.settings import load_settings

    data = tmp_path_factory.mktemp("embedded")
    s = load_settings(env={"ASSISTANT_DATA_DIR": str(data), **env}, toml_path=data / "x")
    # small budgets: these tests prove the plumbing, and a base model talks until the budget ends
    # and generous deadlines: on a shared, loaded CI machine the 270M model can drop below
    # 1 token/s, and these tests are about the plumbing (deadlines are tested with the sim)
    slow = {"read_timeout_s": 300.0, "total_timeout_s": 900.0}
    s = replace(
        s,
        deep=replace(s.deep, max_tokens=160, **slow),
        chat=replace(s.chat, max_tokens=48, **slow),
    )
    return Runtime(s)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """The default layout: an engine process per lane, one thread each."""
    rt = _runtime(tmp_path_factory)
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One engine process both lanes share (`ASSISTANT_EMBEDDED_PER_LANE=false`)."""
    rt = _runtime(tmp_path_factory, ASSISTANT_EMBEDDED_PER_LANE="false")
    yield rt
    rt.close()


def test_embedded_engine_answers_on_loopback(runtime):
    assert runtime.embedded is not None and runtime.notice and "base model" in runtime.notice
    assert runtime.base_url.startswith("http://127.0.0.1:")
    models = httpx.get(runtime.base_url + "/models", timeout=5).json()
    assert models["data"]
    assert runtime.engine.kind == "llamacpp"
    # a process per lane, each with one thread for generation and one for prompts
    chat, deep = runtime.embedded_lanes["chat"], runtime.embedded_lanes["deep"]
    assert chat is runtime.embedded and deep.pid != chat.pid
    assert runtime.settings.engine_deep_url == deep.base_url != runtime.base_url
    for engine in (chat, deep):
        command = engine.command()
        assert command[command.index("--n_threads") + 1] == "1"
        assert command[command.index("--n_threads_batch") + 1] == "1"
        assert len(os.listdir(f"/proc/{engine.pid}/task")) < 2 + os.cpu_count() * 2
    assert runtime.scheduler.lane_slots == {"chat": 1, "deep": 1}
    # the deep lane's process is background work: it yields the CPU to chat (its scheduling
    # group's priority too, since Linux groups the engine's own session apart)
    assert os.getpriority(os.PRIO_PROCESS, deep.pid) >= 10
    assert os.getpriority(os.PRIO_PROCESS, chat.pid) == os.getpriority(os.PRIO_PROCESS, 0)
    group = f"/proc/{deep.pid}/autogroup"
    if os.path.exists(group):
        assert open(group).read().split()[-1] == "10"


@same_loop
async def test_chat_and_deep_turns_through_the_embedded_engine(runtime):
    cid = runtime.store.new_conversation("local")
    chat = await runtime.turns.ask(
        "The capital of France is", conversation_id=cid, deep_inline=True
    )
    deep = await runtime.turns.ask(
        "List three prime numbers.", conversation_id=cid, force_deep=True, deep_inline=True
    )
    for result in (chat, deep):
        assert result.error is None or result.reply, result.error
        assert result.finish_reason in ("stop", "length")
        assert result.timings.ttft and result.timings.ttft > 0
    assert chat.lane == "chat" and deep.lane == "deep"
    assert len(runtime.store.turns(cid)) == 2


def test_stop_kills_our_process_by_pid(tmp_path):
    engine = EmbeddedEngine(tmp_path / "models", ctx=512)
    engine.start()
    pid = engine.proc.pid
    engine.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert engine.proc is None
    engine.stop()  # twice is harmless


@same_loop
async def test_chat_goes_beside_a_running_deep_job_on_its_own_process(runtime, monkeypatch):
    """Each lane has its own process: a chat turn neither waits for nor stops the deep job."""
    import asyncio

    monkeypatch.setattr("assistant.jobs.HEARTBEAT_S", 0.2)
    worker = runtime.worker()
    serving = asyncio.create_task(worker.serve(poll_s=0.1))
    deep_log = runtime.embedded_lanes["deep"].log_path
    chat_log = runtime.embedded.log_path
    went_beside = False
    try:
        for attempt in range(4):
            job = runtime.jobs.submit("local", f"Write a long story about a miller {attempt}.")
            await until(
                lambda j=job: (
                    len(runtime.store.job(j.id).result.split()) > 5 or _ended(runtime, j.id)
                ),
                300,
                "the deep job to produce output",
            )
            if _ended(runtime, job.id):
                continue  # the story ended before the chat turn could go beside it
            chat_before, deep_before = _requests(chat_log), _requests(deep_log)
            chat = await runtime.turns.ask("Hello, how are you?", deep_inline=True)
            went_beside = True
            assert chat.lane == "chat" and chat.finish_reason in ("stop", "length"), chat.error
            # the chat process served it; the deep one got no request (none was resumed)
            assert _requests(chat_log) > chat_before and _requests(deep_log) == deep_before
            await until(lambda j=job: _ended(runtime, j.id), 900, "the job to end")
            break
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    # every story may end before a chat turn could go beside it: then nothing was tested
    assert went_beside, "each deep job ended before the chat turn was sent"
    final = runtime.store.job(job.id)
    assert final.state == "done", final.error
    assert runtime.scheduler.stats["deep"].preemptions == 0  # nothing had to yield


def _requests(log) -> int:
    """Generations an engine process was asked for, from its server's access log."""
    return log.read_text(errors="replace").count("POST /v1/completions")


@same_loop
async def test_chat_preempts_a_deep_job_on_a_shared_engine(shared, monkeypatch):
    import asyncio

    runtime = shared
    assert runtime.scheduler.slots == 1  # llama.cpp's server here serves one request at a time
    assert "deep" not in runtime.embedded_lanes
    monkeypatch.setattr("assistant.jobs.HEARTBEAT_S", 0.2)
    worker = runtime.worker()
    serving = asyncio.create_task(worker.serve(poll_s=0.1))
    try:
        # a short story may end before the chat turn arrives: then another job is tried
        for attempt in range(4):
            job = runtime.jobs.submit("local", f"Write a long story about a keeper {attempt}.")
            partial = ""
            await until(
                lambda j=job: (
                    len(runtime.store.job(j.id).result.split()) > 5 or _ended(runtime, j.id)
                ),
                300,
                "the deep job to produce output",
            )
            partial = runtime.store.job(job.id).result
            assert partial, "the deep job never produced output"
            chat = await runtime.turns.ask("Hello, how are you?", deep_inline=True)
            assert chat.lane == "chat" and chat.finish_reason in ("stop", "length"), chat.error
            await until(lambda j=job: _ended(runtime, j.id), 900, "the job to end")
            if runtime.scheduler.stats["deep"].preemptions:
                break
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    final = runtime.store.job(job.id)
    assert final.state == "done", final.error
    assert final.result.startswith(partial)  # what it generated before the chat turn is kept
    assert runtime.scheduler.stats["deep"].preemptions >= 1


def _ended(runtime, job_id: str) -> bool:
    return runtime.store.job(job_id).state not in ("queued", "running")


class _CrashesAtFirstGeneration(EmbeddedEngine):
    """Lists its model, dies at its first generation: the wrong-CPU build's failure."""

    def command(self) -> list[str]:
        import sys

        return [sys.executable, "-m", "tests.fake_llama", str(self.port)]


def test_start_checks_a_real_generation_and_tells_the_cause(tmp_path):
    from assistant.errors import EngineUnavailable

    engine = _CrashesAtFirstGeneration(tmp_path, log_path=tmp_path / "engine.log")
    with pytest.raises(EngineUnavailable) as caught:
        engine.start(timeout_s=30)
    message = str(caught.value)
    assert "killed by SIGSEGV" in message and "at its first generation" in message
    assert "ldtilecfg" in message  # the last lines of its log
    assert engine.proc is None or engine.proc.poll() is not None


def test_a_long_engine_log_is_rotated_at_start(tmp_path, monkeypatch):
    from assistant.errors import EngineUnavailable

    monkeypatch.setattr("assistant.engine.embedded.LOG_KEEP_BYTES", 1000)
    log = tmp_path / "engine.log"
    log.write_text("old line\n" * 200)
    engine = _CrashesAtFirstGeneration(tmp_path, log_path=log)
    with pytest.raises(EngineUnavailable) as caught:
        engine.start(timeout_s=30)
    assert (tmp_path / "engine.log.1").read_text().count("old line") == 200
    assert "old line" not in log.read_text() and "ldtilecfg" in log.read_text()
    assert "old line" not in str(caught.value)  # the tail is this run's


async def _kill_when(runtime, sig, ready) -> int:
    """Kill the deep lane's engine process with `sig` once `ready()` holds; returns the pid."""
    import signal as _signal

    await until(ready, 300, "the point to kill the engine at")
    pid = runtime.embedded_lanes["deep"].pid
    os.kill(pid, getattr(_signal, sig))
    return pid


@same_loop
async def test_engine_killed_mid_turn_is_reported_and_restarted(runtime):
    import asyncio

    restarts = runtime.embedded_lanes["deep"].restarts
    seen: list[str] = []
    result = None

    async def turn():
        nonlocal result
        request = TurnRequest(
            text="Write a long story about a lighthouse keeper.", force_deep=True, deep_inline=True
        )
        async for update in runtime.turns.stream(request):
            if update.kind == "content":
                seen.append(update.text)
            elif update.kind == "done":
                result = update.result

    task = asyncio.create_task(turn())
    killed = await _kill_when(runtime, "SIGSEGV", lambda: bool(seen))
    await asyncio.wait_for(task, 300)
    assert result is not None
    assert result.finish_reason == "crashed" and result.incomplete
    assert "SIGSEGV" in result.error and "was restarted" in result.error, result.error
    assert "stream was cut" not in result.error
    assert result.reply == "".join(seen)  # what arrived before the crash is kept
    deep = runtime.embedded_lanes["deep"]
    crash = deep.crashes[-1]
    assert crash.pid == killed and "SIGSEGV" in crash.cause and crash.log_tail
    assert deep.restarts == restarts + 1 and deep.pid != killed
    # the banner says so, and the restarted engine answers the next turn
    from assistant.web.page.page import EngineStatus

    status = EngineStatus(
        runtime.info,
        runtime.settings,
        base_url=runtime.base_url,
        warnings=runtime.engine.warnings,
        embedded=tuple(runtime.embedded_lanes.values()),
    )
    banner = await status.banner()
    assert "SIGSEGV" in banner and "restarted" in banner and "deep-lane engine" in banner
    again = await runtime.turns.ask("What is the capital of France?", deep_inline=True)
    assert again.error is None and again.reply.strip(), again.error


@same_loop
async def test_engine_killed_mid_job_resumes_the_job(runtime, monkeypatch):
    import asyncio

    # progress reaches the store at each heartbeat: often enough to kill mid-answer
    monkeypatch.setattr("assistant.jobs.HEARTBEAT_S", 0.2)
    worker = runtime.worker()
    serving = asyncio.create_task(worker.serve(poll_s=0.1))
    try:
        # a short story may end before the kill lands: then another job is tried
        for attempt in range(4):
            job = runtime.jobs.submit("local", f"Write a long story about lighthouse {attempt}.")
            partial = ""

            def producing(job_id: str = job.id) -> bool:
                nonlocal partial
                current = runtime.store.job(job_id)
                partial = current.result
                return len(partial.split()) > 5 or current.state not in ("queued", "running")

            await _kill_when(runtime, "SIGKILL", producing)
            await until(lambda j=job: _ended(runtime, j.id), 900, "the job to end after the crash")
            if worker.crashes:
                break
            await asyncio.to_thread(runtime.embedded_lanes["deep"].ready.wait, 120)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    assert worker.crashes == 1, "no kill landed while a job was generating"
    final = runtime.store.job(job.id)
    assert final.state == "done", final.error
    assert final.result.startswith(partial)  # kept across the crash, then continued
    deep = runtime.embedded_lanes["deep"]
    assert "SIGKILL" in deep.crashes[-1].cause
    assert "SIGKILL" in deep.status() and "restarted" in deep.status()
