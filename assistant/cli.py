"""The `assistant` command. Thin: parses, builds the runtime, calls the package, prints.

Exit codes: 0 ok; 1 error with a one-line message; 2 usage or bad input; 3 the engine gave no
answer (budget exhausted) after recovery.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.cli_chat import print_json as _print_json
from assistant.cli_chat import runtime as _runtime
from assistant.errors import AssistantError, BadInput
from assistant.settings import Settings, load_settings
from assistant.terminal import visible

if TYPE_CHECKING:
    from assistant.routing.conversation import Conversation


def cmd_chat(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.cli_chat import chat

    return chat(args, settings)


def _app_running(settings: Settings) -> bool:
    """An app serves this data directory and answers (its worker runs the store's jobs)."""
    from assistant.app_client import find_app

    app = find_app(settings.data_dir)
    if app is None:
        return False
    app.close()
    return True


def cmd_delegate(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.jobs import JobQueue
    from assistant.limits import check_text
    from assistant.store.db import Store

    text = check_text(" ".join(args.text), settings.max_text_chars)
    wait = args.wait
    if not wait or _app_running(settings):
        store = Store(settings.db_path)
        job = JobQueue(store, settings).submit("local", text, key=args.key)
        while wait and job.state in ("queued", "running"):
            time.sleep(1.0)
            job = store.job(job.id)  # type: ignore[assignment]
        store.close()
    else:
        with _runtime(settings) as rt:
            job = rt.jobs.submit("local", text, key=args.key)
            job = asyncio.run(rt.worker().run_by_id(job.id))
    if args.json:
        _print_json(job.as_json())
    elif job.state == "done":
        print(visible(job.result or ""))
    else:
        print(visible(f"job {job.id}: {job.state}" + (f" ({job.error})" if job.error else "")))
    if job.state == "failed":
        print(visible(f"job {job.id} failed: {job.error}"), file=sys.stderr)
        return 3 if job.error and job.error.startswith(("budget exhausted", "no answer")) else 1
    return 0


def cmd_jobs(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.store.db import Store

    store = Store(settings.db_path)
    try:
        if args.action == "list":
            jobs = store.jobs()
            if args.json:
                for job in jobs:
                    _print_json({k: v for k, v in job.as_json().items() if k != "reasoning"})
            for job in [] if args.json else jobs:
                print(f"{job.id}  {job.state:9}  {job.elapsed_s:7.1f}s  {job.prompt[:60]!r}")
            return 0
        if not args.id:
            raise BadInput(f"jobs {args.action} needs a job id")
        if args.action == "show":
            job = store.job(args.id)
            if job is None:
                raise AssistantError(f"no job {args.id}")
            if args.json:
                _print_json(job.as_json())
            else:
                print(
                    visible(
                        f"{job.id} {job.state} ({job.elapsed_s:.1f}s)\n\n{job.result or job.error}"
                    )
                )
            return 0
        ok = store.cancel_job(args.id)
        if args.json:
            _print_json({"id": args.id, "cancelled": ok})
        if not ok:
            raise AssistantError(f"job {args.id} is not queued or running")
        return 0
    finally:
        store.close()


def cmd_route(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.routing.router import Router

    router = Router.load().warm()  # so the first decision's ms is a decision, not a load
    context = read_history(Path(args.history)) if args.history else None
    for text in args.text:
        d = router.decide(text, conversation=context)
        if args.json:
            _print_json({"lane": d.lane, "reason": d.reason, "ms": round(d.ms, 2)})
        else:
            print(visible(f"{d.lane}\t{d.reason}\t{d.ms:.1f} ms\t{text}"))
    return 0


def read_history(path: Path) -> Conversation:
    """The turns before the routed text, as an OpenAI client sends them (`route --history`)."""
    from assistant.routing.conversation import Conversation, with_known

    try:
        raw = path.read_text()
        rows = (
            json.loads(raw)
            if raw.lstrip().startswith("[")
            else [json.loads(line) for line in raw.splitlines() if line.strip()]
        )
    except (OSError, ValueError) as e:
        raise AssistantError(f"cannot read the history {path}: {e}") from e
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise AssistantError(f"{path}: the history must be a list of {{role, content}} messages")
    jobs = [str(r.get("content")) for r in rows if r.get("role") == "job"]
    job = jobs[-1] if jobs and jobs[-1] in ("running", "done") else None
    return with_known(Conversation.of_messages(rows), job=job)


def cmd_transcribe(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.speech.stt import transcribe_file

    t = transcribe_file(Path(args.file), settings)
    if args.json:
        _print_json(t.as_json())
    else:
        print(visible(t.text))
    return 0


def cmd_speak(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.speech.tts import speak_to_file

    speak_to_file(" ".join(args.text), Path(args.output), settings)
    return 0


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.doctor import run_doctor

    return run_doctor(settings, as_json=args.json)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.web.server import serve

    return serve(settings, host=args.host, port=args.port, tls=args.tls, worker=args.worker,
                 wyoming=args.wyoming)  # fmt: skip


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.worker import run_worker

    return run_worker(settings, args.link_fd)


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from assistant.devtools.bench import run_bench

    return run_bench(
        args.which,
        settings,
        as_json=args.json,
        rounds=args.rounds,
        live=args.live,
        vllm=args.vllm,
        api=args.api,
        soak=args.soak,
        audio_dir=args.audio,
        scale=args.scale,
        calls=args.calls,
        busy=args.busy,
        deep=args.deep,
        engine_cpus=args.engine_cpus,
        deep_caps=args.deep_caps,
        policies=args.policies,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="assistant", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="the web app")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=7860)
    s.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS (a phone's microphone needs it); without ASSISTANT_TLS_CERT/KEY, "
        "with a self-signed certificate made once in the data directory",
    )
    s.add_argument(
        "--no-worker",
        dest="worker",
        action="store_false",
        help="do not start the job worker (run `assistant worker` elsewhere on the same store)",
    )
    s.add_argument(
        "--wyoming",
        nargs="?",
        const="10700",
        metavar="[HOST:]PORT",
        help="also a Wyoming server for Home Assistant (speech to text, text to speech, the "
        "conversation), loopback port 10700 unless given; acts as ASSISTANT_WYOMING_USER",
    )
    s.set_defaults(fn=cmd_serve)

    s = sub.add_parser("worker", help="run delegated jobs (assistant serve starts one itself)")
    s.add_argument("--link-fd", type=int, default=None, help=argparse.SUPPRESS)
    s.set_defaults(fn=cmd_worker)

    s = sub.add_parser(
        "chat",
        help="one typed turn through the router (through the running app when one serves "
        "this data directory), continuing the latest conversation",
    )
    s.add_argument("text", nargs="+")
    s.add_argument("--deep", action="store_true", help="use the deep lane")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--new", action="store_true", help="start a new conversation")
    g.add_argument("--conversation", metavar="ID", help="continue this conversation")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_chat)

    s = sub.add_parser("delegate", help="a deep job")
    s.add_argument("text", nargs="+")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--wait", dest="wait", action="store_true", default=True)
    g.add_argument("--no-wait", dest="wait", action="store_false")
    s.add_argument("--key", help="idempotency key: the same key gives the same job")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_delegate)

    s = sub.add_parser("jobs", help="list, show or cancel jobs")
    s.add_argument("action", nargs="?", default="list", choices=["list", "show", "cancel"])
    s.add_argument("id", nargs="?")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_jobs)

    s = sub.add_parser("route", help="the routing decision only, no engine call")
    s.add_argument("text", nargs="+")
    s.add_argument(
        "--history",
        metavar="FILE",
        help="the conversation before TEXT: a JSON list of {role, content} messages "
        "(or JSON lines of them); a job of it running: a message {role: job, content: running}",
    )
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_route)

    s = sub.add_parser("transcribe", help="speech to text")
    s.add_argument("file")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_transcribe)

    s = sub.add_parser("speak", help="text to a WAV file")
    s.add_argument("text", nargs="+")
    s.add_argument("-o", "--output", required=True)
    s.set_defaults(fn=cmd_speak)

    s = sub.add_parser("doctor", help="probe the engine")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_doctor)

    s = sub.add_parser("bench", help="benchmarks")
    s.add_argument("which", choices=["qos", "voice", "load", "idle", "typed", "turns"])
    s.add_argument("--json", action="store_true")
    s.add_argument("--rounds", type=int, default=None, help="samples per condition")
    s.add_argument(
        "--live",
        action="store_true",
        help="voice: also feed the recordings in real time through the hands-free path",
    )
    s.add_argument(
        "--vllm",
        action="store_true",
        help="qos: on real vLLM servers (FCFS and priority; needs scripts/setup_vllm.sh)",
    )
    s.add_argument(
        "--engine-cpus",
        default=None,
        metavar="LIST|shared",
        help="qos --vllm: the engine's cores (default all but the first, where there are two "
        "or more; the bench, app and worker get the rest); shared: every process on every core",
    )
    s.add_argument(
        "--deep-caps",
        default=None,
        metavar="LIST",
        help="qos --vllm: instead, a sweep of the deep lane's cap (e.g. 1,2,3) on --max-num-seqs "
        "4 beside the lanes-off run: deep throughput and chat p95/p99 per cap; each row is a "
        "JSON line on stdout as it ends, each at most 4 minutes, the table at most 25",
    )
    s.add_argument(
        "--policies",
        default="fcfs,priority",
        metavar="LIST",
        help="qos --vllm --deep-caps: vLLM's scheduling policies to run (fcfs, priority)",
    )
    s.add_argument(
        "--scale",
        action="store_true",
        help="qos: chat p95 for 4/16/64 deep jobs at 50 and 600 tokens/s, before and after",
    )
    s.add_argument(
        "--api",
        choices=["gradio", "openai"],
        default="gradio",
        help="load: the way in (openai: the OpenAI endpoint, beside Gradio's in the same run)",
    )
    s.add_argument(
        "--soak",
        type=int,
        default=0,
        metavar="TURNS",
        help="load: instead, TURNS turns through each way in, the app's memory as it goes",
    )
    s.add_argument(
        "--audio",
        default=None,
        metavar="DIR",
        help="voice, turns: recordings with a transcripts.json (default ../shared/audio; "
        "turns: several joined by ':')",
    )
    s.add_argument(
        "--calls",
        type=int,
        default=0,
        metavar="N",
        help="voice: instead, N calls at once through a running app's /listen, in real time",
    )
    s.add_argument(
        "--busy",
        action="store_true",
        help="a process spinning on one core beside the benchmark (a machine doing other work)",
    )
    s.add_argument(
        "--deep",
        type=int,
        default=0,
        metavar="N",
        help="typed: hand N deep jobs off through /v1 first, so chat is measured beside them",
    )
    s.set_defaults(fn=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        settings = load_settings()
        return args.fn(args, settings)
    except AssistantError as e:
        print(visible(f"error: {e}"), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
