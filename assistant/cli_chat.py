"""`assistant chat`: one typed turn, through the app serving the data directory when one
answers (`assistant.app_client`), else in this process, continuing the same conversation either
way: `--conversation ID` (the local user's), a new one with `--new`, else the local user's most
recently active one."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from assistant.errors import AssistantError, BadInput, BudgetExhausted
from assistant.limits import check_text
from assistant.records import EXHAUSTED_MESSAGE
from assistant.settings import Settings
from assistant.terminal import json_line, visible


def print_json(obj: Any) -> None:
    sys.stdout.write(json_line(obj) + "\n")  # nothing in it a terminal would act on
    sys.stdout.flush()


def runtime(settings: Settings):
    from assistant.runtime import Runtime

    rt = Runtime(settings)
    if rt.notice:
        print(rt.notice, file=sys.stderr)
    return rt


def chat(args: argparse.Namespace, settings: Settings) -> int:
    """One turn: through the app serving this data directory when one answers (its engine,
    its worker, its conversations), else in this process. Either way it continues the local
    user's most recently active conversation unless `--new` or `--conversation ID` says."""
    from assistant.app_client import find_app

    text = check_text(" ".join(args.text), settings.max_text_chars)
    app = find_app(
        settings.data_dir, note=lambda why: print(f"note: {visible(why)}", file=sys.stderr)
    )
    if app is not None:
        try:
            return _chat_through(app, text, args, settings)
        finally:
            app.close()
    from assistant.session import Ask

    with runtime(settings) as rt:
        session = _session(rt.sessions, args, text)
        cid = session.conversation_id
        result = asyncio.run(session.run(Ask(text=text, force_deep=args.deep, deep_inline=True)))
        if result is None:
            raise AssistantError("the turn was stopped")
    if args.json:
        print_json({**result.as_json(), "conversation_id": cid})
    else:
        print(visible(result.reply))  # a reply's escape codes are shown, never run
        _footer(result.error, result.lane, result.reason, result.timings.as_dict())
    if result.exhausted:  # exit code 3
        raise BudgetExhausted(result.error or EXHAUSTED_MESSAGE)
    if result.error and not result.reply:
        return 1
    return 0


LOCAL = "local"
"""The command line's owner: the machine's own user (in-process and through the app)."""


def _session(sessions: Any, args: argparse.Namespace, title: str) -> Any:
    """The conversation the in-process turn continues, by the registry's rule: `--conversation
    ID` (the local user's), a new one with `--new`, else the most recently active one."""
    if args.conversation:
        if not sessions.conversations.owned_by(args.conversation, LOCAL):
            raise AssistantError(f"no conversation {args.conversation}")
        return sessions.of(LOCAL, args.conversation)
    latest = None if args.new else sessions.latest(LOCAL)
    return latest or sessions.of(LOCAL, None, title=title)


def _chat_through(app: Any, text: str, args: argparse.Namespace, settings: Settings) -> int:
    from assistant.app_client import AppError

    # the app resolves the conversation and carries its own history of it (one rule, one
    # history: stopped replies as heard, as the page's turns read them)
    cid = args.conversation or (None if args.new else "latest")
    streamed = not args.json

    def show(piece: str) -> None:
        sys.stdout.write(visible(piece))  # a reply's escape codes are shown, never run
        sys.stdout.flush()

    try:
        reply = app.chat(text, conversation=cid, deep=args.deep,
                         on_text=show if streamed else lambda _: None)  # fmt: skip
    except AppError as e:
        if e.status == 400:
            raise BadInput(e.message) from e
        if e.code == "budget_exhausted":
            raise BudgetExhausted(e.message) from e
        raise AssistantError(e.message) from e
    if args.json:
        print_json(reply.as_json())
    else:
        if not reply.reply.endswith("\n"):
            print()
        _footer(reply.error, reply.lane, reply.reason, reply.timings_ms, via=app.url)
    if reply.code == "budget_exhausted":
        raise BudgetExhausted(reply.error or "the engine gave no answer")
    if reply.error and not reply.reply:
        if not args.json:
            print(visible(f"error: {reply.error}"), file=sys.stderr)
        return 1
    return 0


def _footer(error: str | None, lane: Any, reason: Any, timings: dict[str, float],
            via: str | None = None) -> None:  # fmt: skip
    if error:
        print(visible(f"[{error}]"), file=sys.stderr)
    where = f"; through the app at {via}" if via else ""
    print(visible(f"[{lane}: {reason}; " + ", ".join(f"{k} {v:.0f} ms" for k, v in timings.items())
                  + f"{where}]"), file=sys.stderr)  # fmt: skip
