"""The runtime: builds every component once from Settings and owns their lifetimes."""

from __future__ import annotations

import contextlib
import functools
import logging
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from assistant import limits
from assistant.call.calls import Calls
from assistant.datadir import make_private_dir
from assistant.engine.client import Engine, build_client
from assistant.engine.embedded import (
    CHAT_BUDGET,
    DEEP_BUDGET,
    NOTICE,
    TOKEN_RATE,
    EmbeddedEngine,
)
from assistant.engine.embedded_lanes import start_lanes
from assistant.engine.lanes import LaneScheduler, login_share
from assistant.engine.transcript import TranscriptPrompt
from assistant.errors import EngineUnavailable
from assistant.jobs import JobQueue, JobWorker
from assistant.leftovers import Leftovers
from assistant.loop_lag import LoopLag
from assistant.metrics import AppMetrics
from assistant.prompting.prompt import Prompts
from assistant.session.sessions import Sessions
from assistant.settings import Settings
from assistant.speech.pools import speech_calls
from assistant.store.db import Store
from assistant.turns.chat import ChatService
from assistant.turns.conversations import Conversations
from assistant.turns.pipeline import Pipeline

log = logging.getLogger(__name__)


@dataclass
class EngineInfo:
    """What probing the engine found."""

    reachable: bool
    kind: str
    model: str | None
    slots: int | None = None
    context: int | None = None
    error: str | None = None
    models: list[str] = field(default_factory=list)


def probe(base_url: str, api_key: str | None, kind: str, timeout_s: float = 3.0) -> EngineInfo:
    """Ask the engine what it is: its models, and (for `auto`) which kind of server it is."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(f"{base_url}/models", headers=headers, timeout=timeout_s)
        r.raise_for_status()
        data: dict[str, Any] = r.json()
    except (httpx.HTTPError, ValueError) as e:
        return EngineInfo(False, kind if kind != "auto" else "openai", None, error=str(e))
    entries = [m for m in data.get("data", []) if isinstance(m, dict)]
    models = [m.get("id") for m in entries]
    context = next((m["max_model_len"] for m in entries if m.get("max_model_len")), None)
    owners = {
        str(m.get("owned_by", "")).lower() for m in data.get("data", []) if isinstance(m, dict)
    }
    if kind == "auto":
        if "vllm" in owners:
            kind = "vllm"
        elif owners & {"llamacpp", "me", "llama.cpp"}:
            kind = "llamacpp"  # llama-cpp-python reports owned_by "me"
        else:
            kind = "openai"
    slots = None
    if kind == "llamacpp":  # llama.cpp's server says its slots and window in /props
        slots, props_context = _props(base_url, headers, timeout_s)
        context = context or props_context
    elif kind == "vllm":  # vLLM says its max_num_seqs only with its development endpoints on
        slots = _vllm_server_info_seqs(base_url, headers, timeout_s)
    return EngineInfo(
        True, kind, models[0] if models else None, slots=slots, context=context, models=models
    )


SERVER_INFO_TIMEOUT_S = 15.0
"""vLLM's `/server_info` (development mode only; a plain server answers 404 at once)."""


def _positive(n: Any) -> int | None:
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _props(
    base_url: str, headers: dict[str, str], timeout_s: float
) -> tuple[int | None, int | None]:
    """A llama.cpp server's slots (`total_slots`, its `--parallel`) and context window (per
    slot): `/props`, beside `/v1`."""
    try:
        r = httpx.get(f"{base_url.removesuffix('/v1')}/props", headers=headers, timeout=timeout_s)
        props = r.json() if r.is_success else {}
        ctx = props.get("default_generation_settings", {}).get("n_ctx")
        return _positive(props.get("total_slots")), _positive(ctx)
    except (httpx.HTTPError, ValueError, AttributeError):
        return None, None


def _vllm_server_info_seqs(base_url: str, headers: dict[str, str], timeout_s: float) -> int | None:
    """vLLM's `--max-num-seqs`: in neither `/v1/models` nor `/metrics` (vLLM 0.32), only in
    `/server_info`, which exists when the server runs with VLLM_SERVER_DEV_MODE=1."""
    url = f"{base_url.removesuffix('/v1')}/server_info"
    # its first answer gathers the system's description: 3.1 s on vLLM 0.32 for CPU, measured
    wait = max(timeout_s, SERVER_INFO_TIMEOUT_S)
    try:
        r = httpx.get(url, params={"config_format": "json"}, headers=headers, timeout=wait)
        config = r.json().get("vllm_config", {}) if r.is_success else {}
        return _positive(config.get("scheduler_config", {}).get("max_num_seqs"))
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


class Runtime:
    """Every long-lived object, built once. Use as a context manager (sync) for cleanup."""

    def __init__(
        self, settings: Settings, *, start_engine: bool = True, engine_is_embedded: bool = False
    ):
        """`engine_is_embedded`: the engine at `settings.engine_url` is an embedded one another
        process runs (the job worker's case): shaped like it, and never probed, since any
        request to llama.cpp's server interrupts its generation."""
        self.settings = settings
        self.embedded: EmbeddedEngine | None = None
        """The embedded engine's (chat lane's) process, when this runtime started it."""
        self.embedded_lanes: dict[str, EmbeddedEngine] = {}
        """Its processes by lane: "deep" too where each lane has its own."""
        self.notice: str | None = None
        make_private_dir(settings.data_dir)
        self.store = Store(settings.db_path)
        self.prompts = Prompts.load()
        if settings.engine_url:
            base_url = settings.engine_url
        elif start_engine:
            self.embedded_lanes = start_lanes(
                settings.data_dir / "models",
                ctx=settings.embedded_ctx,
                slots=settings.embedded_slots,
                threads=settings.embedded_threads,
                per_lane=settings.embedded_per_lane,
                log_dir=settings.data_dir,
                # recorded, so a next start ends them if this process is killed (issue 48)
                leftovers=Leftovers(settings.data_dir),
            )
            self.embedded = self.embedded_lanes["chat"]
            base_url = self.embedded.base_url
            deep_engine = self.embedded_lanes.get("deep")
            self.notice = NOTICE
            settings = replace(
                settings,
                chat=replace(settings.chat, max_tokens=min(settings.chat.max_tokens, CHAT_BUDGET)),
                deep=replace(settings.deep, max_tokens=min(settings.deep.max_tokens, DEEP_BUDGET)),
                # the job worker attaches to the same processes
                engine_deep_url=deep_engine.base_url if deep_engine is not None else None,
            )
            self.settings = settings
        else:
            raise EngineUnavailable("no ASSISTANT_ENGINE_URL set and the embedded engine is off")
        self.base_url = base_url
        embedded = self.embedded is not None or engine_is_embedded
        if engine_is_embedded:
            self.info = EngineInfo(True, "llamacpp", settings.model)
        else:
            self.info = probe(base_url, settings.api_key, settings.engine_kind)
        if embedded:
            self.info.kind, self.info.slots = "llamacpp", settings.embedded_slots
            self.info.context = settings.embedded_ctx
        elif settings.engine_context:  # where the engine does not say, or says more
            self.info.context = min(self.info.context or settings.engine_context,
                                    settings.engine_context)  # fmt: skip
        model = settings.model or self.info.model
        deep_url = settings.engine_deep_url if embedded else None
        lanes = (
            {"deep": (build_client(deep_url, settings.api_key), self.embedded_lanes.get("deep"))}
            if deep_url
            else None
        )
        self.engine = Engine(
            build_client(base_url, settings.api_key),
            kind=self.info.kind,
            model=model,
            slots=self.info.slots,
            context=self.info.context,
            # the embedded model is a base model: prompted as a transcript, not a chat
            transcript=(
                TranscriptPrompt(self.prompts.transcript, self.prompts.transcript_deep)
                if embedded
                else None
            ),
            supervisor=self.embedded,
            lanes=lanes,  # type: ignore[arg-type]
        )
        if embedded:  # its tokenizer is known (and its server counts nothing)
            self.engine.window.rate = TOKEN_RATE
        # a login's requests at the engine at once, however they came in (issue 49)
        share = login_share(settings.max_engine_per_user, self.info.slots, len(settings.auth))
        if lanes and self.info.slots:
            # an engine process per lane: each lane waits only for its own slots
            deep_max = settings.deep_max_in_flight or self.info.slots
            self.scheduler = LaneScheduler(
                deep_max_in_flight=deep_max,
                lane_slots={"chat": self.info.slots, "deep": self.info.slots},
                share=share,
            )
        else:
            deep_max = settings.deep_max_in_flight or (
                max(1, self.info.slots - 1) if self.info.slots else 2
            )
            self.scheduler = LaneScheduler(
                deep_max_in_flight=deep_max, slots=self.info.slots, share=share
            )
        self._router: Any = None
        self.jobs = JobQueue(self.store, settings, fits=self._job_fits)
        self.calls = Calls()
        """The calls open on this app's page (`/listen`)."""
        self.conversations = Conversations(self.store)
        self.metrics = AppMetrics(
            depth=self.scheduler.depth,
            job_counts=self.store.job_counts,
            speech_calls=speech_calls,
        )
        # run by whoever owns the loop (the server's lifespan, a bench)
        self.loop_lag = LoopLag(self.metrics.loop_lag.observe, self.metrics.loop_held.observe)

    def disk_refusal(self, owner: str) -> str | None:
        """Why `owner` may store nothing more (`max_disk_bytes_per_user`), or None: one row
        of the store read, with logins only."""
        return limits.disk_refusal(self.settings, owner, self.store.disk_bytes)

    def _job_fits(self, text: str, budget: int) -> None:
        """A job's text is refused at once when it cannot fit the engine's context window."""
        window, messages = self.engine.window, self.prompts.deep(text)
        window.answer(messages, budget, self.engine.overhead(), what="the job's text")

    # the turn path is built on first use: it loads the router (onnxruntime and an embedding
    # warm-up, seconds on a busy CPU) that `assistant doctor` and `jobs` never need
    @functools.cached_property
    def chat(self) -> ChatService:
        return ChatService(
            settings=self.settings,
            engine=self.engine,
            scheduler=self.scheduler,
            router=self.router,
            store=self.store,
            prompts=self.prompts,
            jobs=self.jobs,
        )

    @functools.cached_property
    def turns(self) -> Pipeline:
        return Pipeline(
            self.chat,
            self.settings,
            log_to=self.store,
            observe=lambda result: self.metrics.observe(result.lane, result.timings),
            disk=self.disk_refusal,
        )

    @functools.cached_property
    def sessions(self) -> Sessions:
        """Every open conversation's session: the one way in to `turns` (issue 34)."""
        return Sessions(lambda: self.turns, self.conversations, self.calls)

    @property
    def router(self) -> Any:
        if self._router is None:
            from assistant.routing.router import Router

            self._router = Router.load().warm()
        return self._router

    def worker(self) -> JobWorker:
        return JobWorker(
            store=self.store,
            engine=self.engine,
            scheduler=self.scheduler,
            prompts=self.prompts,
            queue=self.jobs,
            settings=self.settings,
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.store.close()
        for engine in self.embedded_lanes.values():
            engine.stop()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
