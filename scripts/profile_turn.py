"""Where a typed turn's CPU goes in the app (issue 52): the app on the simulated engine (as
`bench load` runs them), a few warm-up turns, then N turns alone through each way in, with a
deterministic profiler in every thread of the app, timed by that thread's own CPU clock.

    .venv/bin/python scripts/profile_turn.py -n 30 --ways openai gradio -o /tmp/turn

Writes OUT-<way>.prof (pstats) and prints, per way, the app's CPU per turn read from /proc
(profiled; the profiler slows Python about threefold, C calls such as the router's encoder
much less) and the largest costs by cumulative time per turn. `--plain` runs the app without
the profiler: the CPU per turn alone, for comparing two checkouts. A coroutine's "calls" are
its resumptions. Bounded: each way's turns
must end within `--deadline` seconds (default 300), or the run stops and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from assistant.devtools.launcher import running
from assistant.devtools.loadclient import ENGINE_CMD, cpu_ms, session
from assistant.engine.embedded import free_port

TURNS_PER_CONVERSATION = 3
"""As `bench load`'s conversations."""


def serve_profiled(args: list[str]) -> int:
    """The app, each thread under its own profiler: SIGUSR1 clears them, SIGUSR2 writes their
    sum to $PROFILE_TURN_OUT-<way>.prof, the way named in the file $PROFILE_TURN_OUT.way."""
    profilers: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start(*_: object) -> None:
        profiler = cProfile.Profile(time.thread_time)
        with lock:
            profilers.append(profiler)
        profiler.enable()

    class Snapshot:  # what pstats reads, without disabling a profiler of another thread
        def __init__(self, stats: dict) -> None:
            self.stats = stats

        def create_stats(self) -> None:
            pass

    def clear(*_: object) -> None:
        with lock:
            for p in profilers:
                p.clear()

    def write(*_: object) -> None:
        merged = None
        with lock:
            for p in profilers:
                cProfile.Profile.snapshot_stats(p)  # type: ignore[attr-defined]
                if p.stats:  # type: ignore[attr-defined]
                    s = pstats.Stats(Snapshot(p.stats))  # type: ignore[arg-type, attr-defined]
                    merged = s if merged is None else merged.add(s)
        out = os.environ["PROFILE_TURN_OUT"]
        if merged is not None:
            merged.dump_stats(f"{out}-{Path(out + '.way').read_text().strip()}.prof")

    signal.signal(signal.SIGUSR1, clear)
    signal.signal(signal.SIGUSR2, write)
    threading.setprofile(start)
    from assistant.cli import main

    return main(args)


async def drive(url: str, pid: int, ways: list[str], n: int, out: str, plain: bool,
                deadline_s: float) -> None:  # fmt: skip
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        for way in ways:
            for warm in range(2):  # first-use costs, not counted
                await session(http, way, -1 - warm, TURNS_PER_CONVERSATION)
            await asyncio.sleep(1.0)
            if not plain:
                os.kill(pid, signal.SIGUSR1)
            cpu0, errors, done = cpu_ms(pid), 0, 0
            async with asyncio.timeout(deadline_s):
                while done < n:
                    turns = min(TURNS_PER_CONVERSATION, n - done)
                    errors += len((await session(http, way, -10 - done, turns))["errors"])
                    done += turns
            per_turn = (cpu_ms(pid) - cpu0) / done
            print(f"{way}: app CPU {per_turn:.1f} ms per turn over {done} turns"
                  f"{' (profiled)' if not plain else ''}, {errors} errors", flush=True)  # fmt: skip
            if not plain:
                await asyncio.to_thread(Path(f"{out}.way").write_text, way)
                os.kill(pid, signal.SIGUSR2)
                await asyncio.sleep(2.0)  # the app writes it on its main thread


def largest(path: str, turns: int, count: int = 25) -> None:
    stats = pstats.Stats(path)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])  # type: ignore[attr-defined]
    for (file, _, name), (_, calls, _, cumulative, _) in rows[:count]:
        where = file.split("site-packages/")[-1].removeprefix(str(Path.cwd()) + "/")
        print(f"  {cumulative * 1000 / turns:7.2f} ms  {calls / turns:6.1f} calls  {where}:{name}")


def main() -> int:
    if sys.argv[1:2] == ["--serve"]:
        return serve_profiled(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=30, help="turns measured per way in")
    p.add_argument("--ways", nargs="+", choices=["openai", "gradio"], default=["openai"])
    p.add_argument("-o", "--out", default=os.path.join(tempfile.gettempdir(), "turn"))
    p.add_argument("--plain", action="store_true", help="no profiler: the CPU per turn only")
    p.add_argument("--deadline", type=float, default=300.0)
    a = p.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        running(ENGINE_CMD, ready_line=True, timeout_s=30) as engine,
    ):
        data, port = Path(tmp), free_port()
        config = data / "assistant.toml"
        config.write_text("max_api_per_user = 60\nmax_queue = 512\n")
        env = dict(os.environ, ASSISTANT_ENGINE_URL=engine.url, ASSISTANT_DATA_DIR=tmp,
                   ASSISTANT_CONFIG=str(config), ASSISTANT_DEEP_MAX_IN_FLIGHT="4",
                   PROFILE_TURN_OUT=a.out)  # fmt: skip
        app = [sys.executable, *(["-m", "assistant.cli"] if a.plain else [__file__, "--serve"])]
        url = f"http://127.0.0.1:{port}/"
        cmd = [*app, "serve", "--port", str(port)]
        with running(cmd, url=url, timeout_s=120, env=env, log=data / "app.log", grace_s=20) as p_:
            try:
                asyncio.run(drive(url, p_.pid, a.ways, a.n, a.out, a.plain, a.deadline))
            except TimeoutError:
                print(f"stopped: the turns took longer than {a.deadline:.0f} s", file=sys.stderr)
                return 1
    if not a.plain:
        for way in a.ways:
            print(f"{way}: largest cumulative costs per turn (profiled time)")
            largest(f"{a.out}-{way}.prof", a.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
