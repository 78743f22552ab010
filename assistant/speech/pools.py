"""Bounded CPU pools for speech: admission by resource.

The engine lanes decide when a request reaches the engine; speech-to-text and synthesis are
CPU work on this machine, so they get their own small thread pools instead of Python's shared
default executor (which would run as many Whisper and Piper calls at once as there are
callers, and with the embedded llama.cpp also on the cores, oversubscribe the CPU: everyone's
speech then gets slower, not just the last caller's). Past the pool's size, calls wait in its
queue, in order, and that wait is part of the turn's `stt` or `tts` time.

Sizes, for C usable cores:
- STT: one worker per 4 cores (at least one), each Whisper call using C // workers threads:
  ctranslate2 parallelizes one transcription well, and two at once would only share the cores.
- TTS: one worker per 4 cores (at least one), each Piper call on one intra-op thread: a
  sentence is short, and a second thread saves little while it would take a core from the
  engine, which is generating the next sentence at the same moment.
- Remote: speech servers of the user's own (`speech.remote`) only wait on the network, so
  their calls run on a pool of their own, `REMOTE_WORKERS` wide: they neither queue behind
  the CPU-bound models nor take their places.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from assistant.limits import SPEECH_SHARE

T = TypeVar("T")
REMOTE_WORKERS = 32
"""Speech-server requests in flight at once from this process (each call has at most two)."""
PER_LOGIN = SPEECH_SHARE
"""A login's calls on the pools at once (`SpeechPools.share`; `assistant.limits`)."""


def usable_cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class PoolSizes:
    stt_workers: int
    stt_threads: int
    """ctranslate2 threads per Whisper call."""
    tts_workers: int
    tts_threads: int
    """onnxruntime intra-op threads per Piper call."""

    @classmethod
    def for_cores(cls, cores: int) -> PoolSizes:
        stt_workers = max(1, cores // 4)
        return cls(stt_workers, max(1, cores // stt_workers), max(1, cores // 4), 1)


@dataclass
class _Share:
    places: asyncio.Semaphore
    users: int = 0


@dataclass
class SpeechPools:
    """The two pools; `run_stt` / `run_tts` run a blocking call on one and await it."""

    sizes: PoolSizes
    _stt: ThreadPoolExecutor = field(init=False)
    _tts: ThreadPoolExecutor = field(init=False)
    _remote: ThreadPoolExecutor = field(init=False)
    _shares: dict[str, _Share] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._stt = ThreadPoolExecutor(self.sizes.stt_workers, thread_name_prefix="stt")
        self._tts = ThreadPoolExecutor(self.sizes.tts_workers, thread_name_prefix="tts")
        self._remote = ThreadPoolExecutor(REMOTE_WORKERS, thread_name_prefix="speech-remote")

    async def run_stt(self, fn: Callable[..., T], *args: object) -> T:
        return await _run(self._stt, fn, *args)

    async def run_tts(self, fn: Callable[..., T], *args: object) -> T:
        return await _run(self._tts, fn, *args)

    async def transcribe(self, stt: Any, samples: Any, **options: Any) -> Any:
        """`stt.transcribe(samples)` on its pool: the remote one for a speech server."""
        pool = self._remote if getattr(stt, "remote", False) else self._stt
        return await _run(pool, functools.partial(stt.transcribe, samples, **options))

    async def synthesize(self, tts: Any, text: str) -> list[Any]:
        """All of `tts.synthesize(text)`'s chunks, on its pool: the remote one for a server."""
        pool = self._remote if getattr(tts, "remote", False) else self._tts
        return await _run(pool, lambda: list(tts.synthesize(text)))

    @contextlib.asynccontextmanager
    async def share(self, owner: str | None) -> AsyncIterator[None]:
        """Hold one of `owner`'s `PER_LOGIN` places on the pools (None: no share, no wait).
        Each login's calls wait their turn among themselves, so a login's next call reaches
        the pool's queue only when its last one is done: logins take turns."""
        if owner is None:
            yield
            return
        entry = self._shares.get(owner)
        if entry is None:
            entry = self._shares[owner] = _Share(asyncio.Semaphore(PER_LOGIN))
        entry.users += 1
        try:
            async with entry.places:
                yield
        finally:
            entry.users -= 1
            if not entry.users:  # memory stays bounded by the logins with calls
                del self._shares[owner]

    def calls(self) -> int:
        """Calls of logins on the pools: holding a login's place or waiting for it (the
        `assistant_speech_calls` gauge; tests wait on it to order logins' calls)."""
        return sum(entry.users for entry in self._shares.values())

    def shutdown(self) -> None:
        self._stt.shutdown(wait=False, cancel_futures=True)
        self._tts.shutdown(wait=False, cancel_futures=True)
        self._remote.shutdown(wait=False, cancel_futures=True)


async def _run(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: object) -> T:
    # like asyncio.to_thread: the caller's context (e.g. log fields) goes with the call
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(pool, call)


_pools: SpeechPools | None = None
_lock = threading.Lock()


def speech_calls() -> int:
    """`SpeechPools.calls` of the process's pools; 0 before any speech (none are made)."""
    return _pools.calls() if _pools is not None else 0


def speech_pools() -> SpeechPools:
    """The process-wide pools (the speech models they run are process-wide too)."""
    global _pools
    with _lock:
        if _pools is None:
            _pools = SpeechPools(PoolSizes.for_cores(usable_cores()))
        return _pools
