"""Settings: `ASSISTANT_*` environment variables over an optional `assistant.toml`, read once.

This is the only module that reads the environment.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from assistant.errors import ConfigError
from assistant.setting_values import (
    parse_admins,
    parse_auth,
    parse_bytes,
    parse_hosts,
    parse_networks,
    parse_proxies,
    parse_sources,
    tls_files,
)

ENGINE_KINDS = ("auto", "vllm", "llamacpp", "openai")


@dataclass(frozen=True)
class LaneConfig:
    """How requests on one lane are shaped and bounded."""

    name: str
    priority: int
    """vLLM request priority; lower is served earlier."""
    reasoning_effort: str
    thinking: bool
    max_tokens: int
    """The answer budget, reasoning included."""
    history_tokens: int
    """History budget: the oldest whole turns are dropped past it."""
    connect_timeout_s: float
    read_timeout_s: float
    """The longest gap between two stream chunks before the stream counts as stalled."""
    total_timeout_s: float
    retries: int = 2
    """Retries on 429/503/connect errors before the first token; the only retry layer."""
    model: str | None = None
    stream_interval: int = 1
    """Tokens per streamed chunk asked of engines that batch them (vLLM's per-request
    `stream_interval`): nobody reads a job token by token, and every chunk costs the reader's
    loop a parse. The first and last chunks still come at once."""


def default_chat_lane() -> LaneConfig:
    return LaneConfig(
        name="chat",
        priority=0,
        reasoning_effort="low",
        thinking=False,
        max_tokens=1024,
        history_tokens=3000,
        connect_timeout_s=3.0,
        read_timeout_s=30.0,
        total_timeout_s=120.0,
    )


def default_deep_lane() -> LaneConfig:
    return LaneConfig(
        name="deep",
        priority=10,
        reasoning_effort="high",
        thinking=True,
        max_tokens=32768,
        history_tokens=16000,
        connect_timeout_s=5.0,
        read_timeout_s=300.0,
        total_timeout_s=3 * 3600.0,
        # 16 tokens a chunk: a sixteenth of the parsing, and progress under a second stale on
        # an engine that makes 16 tokens a second or more
        stream_interval=16,
    )


@dataclass(frozen=True)
class RemoteSpeech:
    """OpenAI-compatible speech servers; a URL left unset keeps that side embedded."""

    stt_url: str | None = None
    """Base URL of a `/v1/audio/transcriptions` server, e.g. `http://gpu-box:8000/v1`."""
    stt_model: str = "whisper-1"
    stt_key: str | None = None
    tts_url: str | None = None
    """Base URL of a `/v1/audio/speech` server."""
    tts_model: str = "tts-1"
    tts_voice: str = "alloy"
    tts_key: str | None = None
    fallback: str = "none"
    """`local`: when a server fails, use the embedded model (said once); `none`: an error."""
    timeout_s: float = 15.0
    """The deadline of one request to a speech server."""


@dataclass(frozen=True)
class Settings:
    """Everything configurable, built once at start-up and passed down."""

    engine_url: str | None = None
    """OpenAI-compatible base URL; None starts the embedded llama.cpp server."""
    engine_kind: str = "auto"
    engine_context: int | None = None
    """The engine's context window in tokens (`ASSISTANT_ENGINE_CONTEXT`), for an engine that
    does not say (vLLM's `/v1/models` and llama.cpp's `/props` do); the smaller one counts."""
    model: str | None = None
    api_key: str | None = None
    data_dir: Path = field(default_factory=lambda: Path.home() / ".assistant")
    whisper_model: str | None = None
    voice: str | None = None
    voice_variation: float = 1.0
    """How much the embedded voice varies from one synthesis to the next (Piper's noise, as a
    share of the voice's own `noise_scale` and `noise_w`): 1 as the voice has it, 0 none (the
    same text always gives the same audio)."""
    speech: RemoteSpeech = field(default_factory=lambda: RemoteSpeech())
    """Speech servers of the user's own (`ASSISTANT_STT_URL`, `ASSISTANT_TTS_URL`); unset: the
    embedded models."""
    auth: tuple[tuple[str, str], ...] = ()
    deep_max_in_flight: int | None = None
    """None: the engine's slots minus one where it reports them, else 2."""
    chat: LaneConfig = field(default_factory=default_chat_lane)
    deep: LaneConfig = field(default_factory=default_deep_lane)
    max_text_chars: int = 8000
    max_upload_bytes: int = 20 * 1024 * 1024
    max_audio_s: float = 120.0
    max_jobs_per_user: int = 5
    max_queue: int = 64
    max_api_per_user: int = 8
    """`/v1` requests one login may have running at once (`max_queue` bounds them all)."""
    max_turns_per_user: int = 8
    """Page and Gradio API events (turns) one login may have waiting or running at once."""
    max_engine_per_user: int = 0
    """One login's requests at the engine at once on each lane, whatever way they came in (the
    rest wait their turn in the app, logins taking turns); 0: with two logins or more, the
    engine's slots minus one where the app knows them, else 2; with fewer, no bound
    (`engine.lanes.login_share`)."""
    deep_inline_deadline_s: float = 1800.0
    """An inline deep answer's deadline (`/v1` with high effort, `chat --deep`), its waits for
    the deep lane included: past it the answer ends with what it has."""
    max_upload_bytes_per_day: int = 64 * 1024 * 1024
    """Upload bytes a login may send in a day (page uploads and `/v1/audio`; `limits`)."""
    max_disk_bytes_per_user: int = 256 * 1024 * 1024
    """Bytes of turns and jobs a login may keep in the store (with logins; 0: no limit): past
    it, its next turn, job or upload is refused naming this, and nothing stored is deleted
    (`limits.disk_refusal`)."""
    admins: tuple[str, ...] | None = None
    """Logins shown the engine's details on the Dashboard (`ASSISTANT_ADMINS`); None: the
    first login in `ASSISTANT_AUTH`."""
    login_max_age_s: int = 7 * 86400
    """How long a login lasts before it must be given again (the page shows the login form)."""
    cache_max_age_s: int = 86400
    """Gradio's cache (uploads, audio it served, exports): files older than this are deleted,
    checked every hour (or every `cache_max_age_s`, if shorter)."""
    embedded_ctx: int = 4096
    embedded_slots: int = 1
    embedded_threads: int = 1
    """Threads per embedded engine process. llama.cpp's threads spin at every barrier, so when
    another program takes a core, the thread that lost it stalls the other: with two threads a
    typed turn's p95 went from 345 ms to 18 s with one core busy, with one from 400 to 419 ms
    (docs/benchmarks.md, "A busy machine")."""
    embedded_per_lane: bool = True
    """One embedded engine process per lane: chat never waits behind a deep prompt (llama.cpp's
    server finishes a prompt before it looks at another request), and its prefix stays cached."""
    engine_deep_url: str | None = None
    """The deep lane's own engine, where it has one: the embedded engine's deep process, told to
    the job worker by the app. Not read from the environment."""
    handsfree_pause_ms: int = 1500
    """Hands-free: the silence that ends a turn whatever the turn-end model says (the model
    usually ends it after 200 ms; see `call.listener.ListenConfig.fallback_ms`)."""
    call_idle_s: float = 600.0
    """A call in which nothing is said for this long ends (`ASSISTANT_CALL_IDLE_S`); the page
    is warned first (`call.idle`). People on a call think and read: minutes, not seconds."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    """PEM files: serve HTTPS with them (see `web.edge.tls`); both or neither."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names served besides localhost and loopback addresses (and the `--tls`
    certificate's names); any other `Host` is refused (`web.edge.exposure`, DNS rebinding)."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or networks of reverse proxies whose forwarded headers (`X-Forwarded-For`,
    `X-Forwarded-Proto`) are believed (`ASSISTANT_TRUSTED_PROXIES`); default none: the
    client's address is the peer's, whatever a request says (issue 38)."""
    page_sources: tuple[str, ...] = ()
    """Other origins the page may load images, media and scripts from
    (`ASSISTANT_PAGE_SOURCES`, e.g. `https://images.example.org`); default none: the content
    security policy allows the app's own origin only (`web.edge.security.CSP`)."""
    wyoming_user: str | None = None
    """The login a Wyoming client (Home Assistant) acts as (`ASSISTANT_WYOMING_USER`; checked
    by `wyoming.access`). Wyoming has no authentication."""
    wyoming_clients: tuple[str, ...] = ()
    """Addresses or networks besides loopback that may use the Wyoming port
    (`ASSISTANT_WYOMING_CLIENTS`, e.g. `192.168.1.10`); needed to listen on a non-loopback
    host (`assistant serve --wyoming HOST:PORT`)."""

    @property
    def admin_logins(self) -> tuple[str, ...]:
        if self.admins is not None:
            return self.admins
        return self.auth[0][:1] if self.auth else ()

    @property
    def db_path(self) -> Path:
        return self.data_dir / "assistant.db"


def _lane_from(base: LaneConfig, table: dict[str, Any]) -> LaneConfig:
    known = {f.name for f in fields(LaneConfig)} - {"name"}
    unknown = set(table) - known
    if unknown:
        raise ConfigError(
            f"unknown lane setting(s) in assistant.toml: {', '.join(sorted(unknown))}"
        )
    lane = replace(base, **table)
    if lane.name == "deep" and lane.max_tokens < 8192:
        raise ConfigError("deep.max_tokens must be at least 8192")
    return lane


def load_settings(env: dict[str, str] | None = None, toml_path: Path | None = None) -> Settings:
    """Build Settings from the environment over an optional TOML file."""
    env = dict(os.environ) if env is None else env
    path = toml_path or Path(env.get("ASSISTANT_CONFIG", "assistant.toml"))
    table: dict[str, Any] = {}
    if path.is_file():
        try:
            table = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: {e}") from e
    lanes = {name: table.pop(name, {}) for name in ("chat", "deep")}
    top = {k: v for k, v in table.items()}

    def pick(var: str, key: str, default: Any = None) -> Any:
        value = env.get(var)
        if value not in (None, ""):
            return value
        return top.get(key, default)

    kind = str(pick("ASSISTANT_ENGINE_KIND", "engine_kind", "auto")).lower()
    if kind not in ENGINE_KINDS:
        raise ConfigError(f"ASSISTANT_ENGINE_KIND must be one of {', '.join(ENGINE_KINDS)}")
    in_flight = pick("ASSISTANT_DEEP_MAX_IN_FLIGHT", "deep_max_in_flight")
    if in_flight is not None:
        try:
            in_flight = int(in_flight)
        except ValueError as e:
            raise ConfigError("ASSISTANT_DEEP_MAX_IN_FLIGHT must be a whole number") from e
        if in_flight < 1:
            raise ConfigError("ASSISTANT_DEEP_MAX_IN_FLIGHT must be at least 1")
    context = pick("ASSISTANT_ENGINE_CONTEXT", "engine_context")
    if context is not None:
        if not str(context).isdigit() or int(context) < 256:
            raise ConfigError("ASSISTANT_ENGINE_CONTEXT must be a whole number of tokens (>= 256)")
    data_dir = pick("ASSISTANT_DATA_DIR", "data_dir")
    auth = pick("ASSISTANT_AUTH", "auth", "")
    url = pick("ASSISTANT_ENGINE_URL", "engine_url")
    extra = {
        k: top[k]
        for k in (
            "max_text_chars",
            "max_upload_bytes",
            "max_audio_s",
            "max_jobs_per_user",
            "max_queue",
            "max_api_per_user",
            "max_turns_per_user",
            "max_engine_per_user",
            "deep_inline_deadline_s",
            "max_upload_bytes_per_day",
            "cache_max_age_s",
            "login_max_age_s",
            "embedded_ctx",
            "embedded_slots",
            "handsfree_pause_ms",
        )
        if k in top
    }
    disk = pick("ASSISTANT_MAX_DISK_BYTES_PER_USER", "max_disk_bytes_per_user")
    if disk is not None:
        extra["max_disk_bytes_per_user"] = parse_bytes(disk, "ASSISTANT_MAX_DISK_BYTES_PER_USER")
    # how the embedded engine is laid out on the cores (measured in `bench qos`, README)
    threads = pick("ASSISTANT_EMBEDDED_THREADS", "embedded_threads")
    if threads is not None:
        try:
            extra["embedded_threads"] = int(threads)
        except ValueError as e:
            raise ConfigError("ASSISTANT_EMBEDDED_THREADS must be a whole number") from e
        if extra["embedded_threads"] < 1:
            raise ConfigError("ASSISTANT_EMBEDDED_THREADS must be at least 1")
    per_lane = pick("ASSISTANT_EMBEDDED_PER_LANE", "embedded_per_lane")
    if per_lane is not None:
        if str(per_lane).lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ConfigError("ASSISTANT_EMBEDDED_PER_LANE must be true or false")
        extra["embedded_per_lane"] = str(per_lane).lower() in ("1", "true", "yes")
    fallback = str(pick("ASSISTANT_SPEECH_FALLBACK", "speech_fallback", "none")).lower()
    if fallback not in ("none", "local"):
        raise ConfigError("ASSISTANT_SPEECH_FALLBACK must be 'local' or 'none'")
    stt_url, tts_url = pick("ASSISTANT_STT_URL", "stt_url"), pick("ASSISTANT_TTS_URL", "tts_url")
    try:
        speech_timeout = float(pick("ASSISTANT_SPEECH_TIMEOUT_S", "speech_timeout_s", 15.0))
    except ValueError as e:
        raise ConfigError("ASSISTANT_SPEECH_TIMEOUT_S must be a number of seconds") from e
    speech = RemoteSpeech(
        stt_url=stt_url.rstrip("/") if stt_url else None,
        stt_model=pick("ASSISTANT_STT_MODEL", "stt_model", "whisper-1"),
        stt_key=pick("ASSISTANT_STT_KEY", "stt_key"),
        tts_url=tts_url.rstrip("/") if tts_url else None,
        tts_model=pick("ASSISTANT_TTS_MODEL", "tts_model", "tts-1"),
        tts_voice=pick("ASSISTANT_TTS_VOICE", "tts_voice", "alloy"),
        tts_key=pick("ASSISTANT_TTS_KEY", "tts_key"),
        fallback=fallback,
        timeout_s=speech_timeout,
    )
    bad_variation = "ASSISTANT_VOICE_VARIATION must be a number from 0 to 1"
    try:
        variation = float(pick("ASSISTANT_VOICE_VARIATION", "voice_variation", 1.0))
    except ValueError as e:
        raise ConfigError(bad_variation) from e
    if not 0 <= variation <= 1:  # NaN too
        raise ConfigError(bad_variation)
    try:
        call_idle = float(pick("ASSISTANT_CALL_IDLE_S", "call_idle_s", 600.0))
    except ValueError as e:
        raise ConfigError("ASSISTANT_CALL_IDLE_S must be a number of seconds") from e
    if call_idle <= 0:
        raise ConfigError("ASSISTANT_CALL_IDLE_S must be more than 0")
    tls_cert, tls_key = tls_files(
        pick("ASSISTANT_TLS_CERT", "tls_cert"), pick("ASSISTANT_TLS_KEY", "tls_key")
    )
    return Settings(
        engine_url=url.rstrip("/") if url else None,
        engine_kind=kind,
        engine_context=int(context) if context is not None else None,
        model=pick("ASSISTANT_MODEL", "model"),
        api_key=pick("ASSISTANT_API_KEY", "api_key"),
        data_dir=Path(data_dir).expanduser() if data_dir else Path.home() / ".assistant",
        whisper_model=pick("ASSISTANT_WHISPER_MODEL", "whisper_model"),
        voice=pick("ASSISTANT_VOICE", "voice"),
        voice_variation=variation,
        speech=speech,
        auth=parse_auth(auth) if auth else (),
        deep_max_in_flight=in_flight,
        chat=_lane_from(default_chat_lane(), lanes["chat"]),
        deep=_lane_from(default_deep_lane(), lanes["deep"]),
        tls_cert=tls_cert,
        tls_key=tls_key,
        allowed_hosts=parse_hosts(pick("ASSISTANT_ALLOWED_HOSTS", "allowed_hosts", "")),
        trusted_proxies=parse_proxies(pick("ASSISTANT_TRUSTED_PROXIES", "trusted_proxies", "")),
        page_sources=parse_sources(pick("ASSISTANT_PAGE_SOURCES", "page_sources", "")),
        admins=parse_admins(pick("ASSISTANT_ADMINS", "admins")),
        wyoming_user=str(pick("ASSISTANT_WYOMING_USER", "wyoming_user", "")).strip() or None,
        wyoming_clients=parse_networks(
            pick("ASSISTANT_WYOMING_CLIENTS", "wyoming_clients", ""), "ASSISTANT_WYOMING_CLIENTS"
        ),
        call_idle_s=call_idle,
        **extra,
    )
