"""The embedded engine's processes by lane: one per lane, started side by side and checked."""

from __future__ import annotations

import threading
from pathlib import Path

from assistant.engine.embedded import EmbeddedEngine, gguf_path
from assistant.leftovers import Leftovers

DEEP_NICE = 10
"""The deep lane's process yields the CPU to chat, the app and the person's other programs: a
job is background work, and on two cores its one thread otherwise takes as much as the chat
turn the person is waiting for."""


def start_lanes(
    models_dir: Path,
    *,
    ctx: int,
    slots: int,
    threads: int,
    per_lane: bool,
    log_dir: Path,
    leftovers: Leftovers | None = None,
) -> dict[str, EmbeddedEngine]:
    """The embedded engine's processes by lane, started and checked: one per lane, or one that
    both lanes share (`per_lane=False`). Raises EngineUnavailable with none left running.

    One per lane because llama.cpp's server serves one request at a time and finishes a prompt
    before it looks at the next request: behind a resumed deep prompt a chat turn waited seconds
    (`bench qos`), and every deep request evicted the chat prefix from its cache."""
    model = gguf_path(models_dir)  # assembled once, before two processes could race to it
    engines = {"chat": EmbeddedEngine(models_dir, ctx=ctx, slots=slots, threads=threads,
                                      log_path=log_dir / "engine.log",
                                      leftovers=leftovers)}  # fmt: skip
    if per_lane:
        engines["deep"] = EmbeddedEngine(
            models_dir, ctx=ctx, slots=slots, threads=threads,
            log_path=log_dir / "engine-deep.log", label="deep-lane engine", nice=DEEP_NICE,
            leftovers=leftovers,
        )  # fmt: skip
    errors: list[BaseException] = []

    def start(engine: EmbeddedEngine) -> None:
        engine._model = model
        try:
            engine.start()
        except BaseException as e:  # reported below, once both have tried
            errors.append(e)

    starters = [threading.Thread(target=start, args=(e,), daemon=True) for e in engines.values()]
    for t in starters:
        t.start()
    try:
        for t in starters:
            t.join()
    except BaseException:  # stopped while starting (Ctrl-C): no process outlives the app
        for engine in engines.values():
            engine.stop()
        raise
    if errors:
        for engine in engines.values():
            engine.stop()
        raise errors[0]
    return engines
