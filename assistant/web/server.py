"""`assistant serve`: the web app. Builds the runtime, starts the job worker, serves the page.

The job worker is a child process (`assistant.worker`), started and supervised by a kept task
on the server's event loop (a FastAPI lifespan) and stopped with the server: a deep job's token
flood never runs on the loop that serves chat. The loop's own lag is sampled there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.app_client import announce, local_url, new_secret, withdraw
from assistant.datadir import UMASK, exposure, make_private_dir, write_private
from assistant.leftovers import Leftovers
from assistant.limits import cap_page_turns
from assistant.runtime import Runtime
from assistant.settings import Settings
from assistant.web.edge.security import is_loopback
from assistant.worker import worker_process

if TYPE_CHECKING:  # gradio loads only when the app serves
    from assistant.speech.models import SpeechModels

log = logging.getLogger(__name__)

SESSION_STATES = 256
"""Gradio sessions whose state is kept, the least recently used dropped first (an open page
uses its own every few seconds, on its timers): the memory stays bounded (~50 MB)."""
SHUTDOWN_GRACE_S = 3.0
"""Open page connections (streams, timers) get this long to end when the server stops."""


def ensure_ffmpeg(bin_dir: Path) -> bool:
    """Make an `ffmpeg` findable on PATH; Gradio needs one to stream audio out.

    Without a system ffmpeg, the binary shipped in the `imageio-ffmpeg` wheel is linked into
    `bin_dir` and that directory is put first on this process's PATH.
    """
    if shutil.which("ffmpeg"):
        return True
    try:
        import imageio_ffmpeg

        exe = Path(imageio_ffmpeg.get_ffmpeg_exe())
    except (ImportError, RuntimeError):
        return False
    bin_dir.mkdir(parents=True, exist_ok=True)
    link = bin_dir / "ffmpeg"
    if link.is_symlink() and link.resolve() != exe.resolve():
        link.unlink()
    if not link.exists():
        link.symlink_to(exe)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    return shutil.which("ffmpeg") is not None


def lifespan(rt: Runtime, speech: SpeechModels, worker: bool = True,
             local_secret: str | None = None,
             wyoming: socket.socket | None = None) -> Callable[[Any], Any]:  # fmt: skip
    """A FastAPI lifespan that supervises the job worker process (unless `worker` is off),
    samples the loop's lag and warms speech, on the server's loop. `local_secret`: what the
    app's own command line sends (`assistant.app_client`). `wyoming`: the Wyoming port's
    socket, served on this loop too (`assistant.wyoming`)."""

    @contextlib.asynccontextmanager
    async def run(app: Any) -> AsyncIterator[None]:
        # routes added here exist before the server accepts its first connection
        add_routes(app, rt, speech, local_secret)
        tasks = [
            asyncio.create_task(speech.warm(), name="warm-speech"),
            asyncio.create_task(rt.loop_lag.run(), name="loop-lag"),
        ]
        if worker:
            tasks.append(asyncio.create_task(worker_process(rt).run(), name="job-worker"))
            tasks[-1].add_done_callback(_report_crash)
        wyoming_server = None
        if wyoming is not None:
            from assistant.wyoming.server import WyomingServer

            wyoming_server = WyomingServer(rt, speech)
            await wyoming_server.start(wyoming)
        try:
            yield
        finally:
            if wyoming_server is not None:
                await wyoming_server.stop()
            # the worker's task stops its process, which hands running jobs back first
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    return run


def _report_crash(task: asyncio.Task) -> None:
    # without this, a worker that died would only be noticed as jobs that never start
    if not task.cancelled() and task.exception() is not None:
        log.error("the job worker stopped: %r", task.exception())


def serve(
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 7860,
    tls: bool = False,
    worker: bool = True,
    wyoming: str | None = None,
) -> int:
    """Run the web app until SIGINT/SIGTERM. Exit code 2: refused to listen unsafely.
    `worker`: start the job worker process (off: one runs elsewhere on the same store).
    `wyoming`: `[HOST:]PORT` of a Wyoming server beside it (`assistant.wyoming`).

    `tls`: serve HTTPS with the self-signed certificate (made once in the data directory)
    when no ASSISTANT_TLS_CERT/KEY are set; with them, HTTPS is on anyway."""
    if not is_loopback(host) and not settings.auth:
        print(
            f"error: refusing to listen on {host} without a login; set "
            "ASSISTANT_AUTH=user:password (or serve on 127.0.0.1)",
            file=sys.stderr,
        )
        return 2
    wyoming_sock = _wyoming_socket(settings, wyoming) if wyoming is not None else None
    if isinstance(wyoming_sock, str):
        print(f"error: {wyoming_sock}", file=sys.stderr)
        return 2
    # what this process, its worker and its libraries write is its user's alone: the store,
    # Gradio's cache of uploads and exports (issue 49)
    os.umask(UMASK)
    make_private_dir(settings.data_dir)
    if why := exposure(settings.data_dir):
        print(f"warning: {why}", file=sys.stderr)
    from assistant.web.edge.tls import SecureCookies, describe, server_certificate

    # checked (or made) before anything slow starts: a bad file is a one-line error at once
    certificate = server_certificate(
        settings.tls_cert, settings.tls_key, tls, settings.data_dir, host
    )
    ssl: dict[str, Any] = {}
    if certificate is not None:
        # ssl_verify=False: Gradio's own start-up request to itself must accept a self-signed
        # certificate; browsers still check it
        ssl = {"ssl_certfile": str(certificate.cert), "ssl_keyfile": str(certificate.key),
               "ssl_verify": False}  # fmt: skip
        for line in describe(certificate, host, port):
            print(line, file=sys.stderr, flush=True)
    ensure_ffmpeg(settings.data_dir / "bin")
    # what a killed run on this data directory left (engines, worker, temp files) ends first;
    # then this run's temp files go to a directory of its own, removed when it stops (issue 48)
    leftovers = Leftovers(settings.data_dir)
    leftovers.end()
    scratch = leftovers.scratch()
    restore_temp = use_temp_dir(scratch)
    # imports gradio: only once we know we will serve
    from starlette.middleware import Middleware

    from assistant.speech.models import SpeechModels
    from assistant.web.edge.security import edge_middleware, launch_options
    from assistant.web.page.page import PAGE_CSS, PAGE_HEAD, build_ui

    pidfile = settings.data_dir / "serve.pid"
    # the command line on this data directory becomes a client of this app (app_client)
    local_secret = new_secret()
    demo = None
    rt: Runtime | None = None
    stop = _stop_on_signals()
    try:
        rt = Runtime(settings)
        write_private(pidfile, str(os.getpid()))
        if rt.notice:
            print(rt.notice, file=sys.stderr)
        if not rt.info.reachable:
            print(f"warning: the engine at {rt.base_url} is unreachable: {rt.info.error}",
                  file=sys.stderr)  # fmt: skip
        # one SpeechModels: the lifespan warms it, the page's banner shows its progress
        speech = SpeechModels(rt.settings)
        demo = build_ui(rt, speech)
        # Admission is by resource: the engine lanes decide when a request reaches the engine,
        # and speech waits on its own CPU pools. Gradio's per-event limit is only a backstop
        # (as many running as may wait), so its queue is not where people wait.
        # Gradio rebuilds a pandas summary of its event analytics on every event by default
        # (2 ms, growing with the server's age); once per 1000 events is plenty
        os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
        # uvicorn believes X-Forwarded-For and X-Forwarded-Proto from the addresses in
        # FORWARDED_ALLOW_IPS, loopback by default: then any local client could name its own
        # address and escape the login throttle (issue 38). Only the proxies the operator names
        # are believed; none by default ("" matches no peer).
        os.environ["FORWARDED_ALLOW_IPS"] = ",".join(settings.trusted_proxies)
        demo.queue(max_size=settings.max_queue, default_concurrency_limit=settings.max_queue)
        quiet_queue(demo)
        # a new session (a page, an API client's session hash) builds no block configs
        from assistant.web.page.session_state import lazy_session_configs

        lazy_session_configs()
        # one login's turns cannot fill the queue for the others (assistant.limits)
        cap_page_turns(demo._queue, settings.max_turns_per_user)
        demo.launch(
            server_name=host,
            server_port=port,
            show_error=True,
            css=PAGE_CSS,
            head=PAGE_HEAD,
            prevent_thread_lock=True,
            quiet=True,
            # Gradio runs at most max_threads events at once across the app (40 by default),
            # whatever the per-event limit: as many as may wait, like that limit
            max_threads=max(40, settings.max_queue),
            # every session (a page, an API client's session hash) costs ~190 KB of Gradio
            # state, kept for the 10,000 most recent by default: about 2 GB
            state_session_capacity=SESSION_STATES,
            app_kwargs={
                "lifespan": lifespan(rt, speech, worker, local_secret, wyoming_sock),
                # over HTTPS, login cookies are Secure (assistant.web.edge.tls)
                # the certificate's names are served like ASSISTANT_ALLOWED_HOSTS
                "middleware": [
                    *edge_middleware(
                        settings,
                        certificate.names if certificate else (),
                        rt.calls.logout,
                        disk=rt.disk_refusal,  # a login over its disk uploads nothing more
                    ),
                    Middleware(SecureCookies),
                ],
            },
            **launch_options(settings),  # share, SSR, auth, upload cap, blocked paths
            **ssl,
        )
        if demo.server is not None:
            # uvicorn waits for open connections forever by default; a page's streams
            # would then hold the shutdown (and the job worker's clean stop) hostage
            demo.server.config.timeout_graceful_shutdown = SHUTDOWN_GRACE_S
        scheme = "https" if certificate is not None else "http"
        bound = getattr(demo, "server_port", None) or port
        announce(settings.data_dir, local_url(scheme, host, bound), local_secret)
        print(f"serving on {scheme}://{host}:{port}", file=sys.stderr, flush=True)
        if wyoming_sock is not None:
            from assistant.wyoming.access import login

            where = wyoming_sock.getsockname()
            print(f"Wyoming on tcp://{where[0]}:{where[1]} as the login {login(settings)}",
                  file=sys.stderr, flush=True)  # fmt: skip
        while not stop.wait(0.5):
            pass
        return 0
    finally:
        withdraw(settings.data_dir, local_secret)  # first: no command line sends here now
        if wyoming_sock is not None:
            wyoming_sock.close()
        if demo is not None:
            demo.close()
        if rt is not None:
            rt.close()
        with contextlib.suppress(OSError, ValueError):
            if int(pidfile.read_text().strip()) == os.getpid():
                pidfile.unlink()
        restore_temp()
        leftovers.remove(scratch)


def _wyoming_socket(settings: Settings, address: str) -> socket.socket | str:
    """The Wyoming port, bound before anything slow starts; or why it may not be."""
    from assistant.wyoming.access import parse_address, refusal
    from assistant.wyoming.server import listening_socket

    try:
        host, port = parse_address(address)
    except ValueError as e:
        return str(e)
    if why := refusal(settings, host):
        return why
    try:
        return listening_socket(host, port)
    except OSError as e:
        return f"the Wyoming port {host}:{port} cannot be used: {e}"


def use_temp_dir(path: Path) -> Callable[[], None]:
    """Have this process's temp files (Gradio's uploads and cache, exports, downloads) and its
    children's go to `path`; returns what undoes it."""
    before = tempfile.tempdir, {k: os.environ.get(k) for k in ("TMPDIR", "GRADIO_TEMP_DIR")}
    tempfile.tempdir = str(path)
    os.environ["TMPDIR"] = str(path)
    # one the operator set is kept: theirs to clean
    os.environ.setdefault("GRADIO_TEMP_DIR", str(path / "gradio"))

    def restore() -> None:
        tempfile.tempdir = before[0]
        for key, value in before[1].items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    return restore


def add_routes(
    app: Any, rt: Runtime, speech: SpeechModels, local_secret: str | None = None
) -> None:
    """The app's own routes beside Gradio's: `/metrics` (`assistant.web.metrics_route`),
    the hands-free microphone stream `/listen` (`assistant.web.call`) and the
    OpenAI-compatible `/v1/...` (`assistant.web.openai.route`)."""
    from assistant.web.metrics_route import add_metrics_route

    add_metrics_route(app, rt)
    from assistant.web.call import add_listen_route

    add_listen_route(app, rt, speech)
    # the OpenAI-compatible API: a turn per request, outside Gradio's queue
    from assistant.web.openai.route import add_openai_routes

    route = add_openai_routes(app, rt.sessions, rt.settings, local_secret)
    from assistant.web.openai.audio import add_audio_routes

    add_audio_routes(app, route, speech, rt.settings)  # its speech, under the same gate


QUEUE_POLL_S = 0.005
"""How often Gradio's queue looks for work when it has none (its default: every 1 ms)."""
PROGRESS_POLL_S = 0.25
"""How often it looks for progress updates to send (default 10 ms); the page sends none."""


def quiet_queue(demo: Any) -> None:
    """Make Gradio's idle queue polling cheap: at its defaults (1 ms and 10 ms) the loop wakes
    ~1100 times a second for nothing, a fifth of the app's CPU per typed turn when measured.
    A 5 ms poll adds at most 5 ms before an event starts. These are private attributes of
    Gradio 6.31's Queue (pinned); a test checks they still exist."""
    queue = demo._queue
    for name, value in (
        ("sleep_when_free", QUEUE_POLL_S),
        ("progress_update_sleep_when_free", PROGRESS_POLL_S),
    ):
        if not hasattr(queue, name):
            log.warning("Gradio's queue has no %s; idle polling stays at its default", name)
            continue
        setattr(queue, name, value)
    # with nothing to do it waits to be woken rather than polling (web.page.queue_wake)
    from assistant.web.page.queue_wake import wake_on_work

    wake_on_work(queue)


def _stop_on_signals() -> threading.Event:
    """An event set by SIGINT/SIGTERM, installed before anything answers requests so a stop
    signal always ends in the cleanup (worker cancelled, pid file removed)."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    return stop
