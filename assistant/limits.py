"""Every per-login bound, in one place (issue 38, item 3).

One login must not be able to take what the others need. Each bound below is counted per
login (and where it matters, for all logins together), and each refusal names its limit, so
a person (or a client) over it reads which one and what to do; other logins are unaffected.

- calls (`/listen`): `CALLS_PER_LOGIN` (2) per login, `CALLS` (8) in all; the call's
  message (`call.calls.Calls`).
- `/v1` requests at once: `max_api_per_user` (8), `max_queue` in all; 429
  (`web.openai.route.Admission`).
- page and Gradio API turns (Gradio events) waiting or running: `max_turns_per_user` (8);
  429, which the page shows (`cap_page_turns` on Gradio's queue; `max_queue` in all).
- deep jobs queued or running: `max_jobs_per_user` (5), an inline deep answer counted as one
  while it runs; the page's message, 429 on `/v1` (`jobs.JobQueue`).
- requests at the engine at once, per lane, whatever way they came in: `max_engine_per_user`
  (with two logins or more: the engine's slots minus one, else 2); not refused: the rest wait
  in the app and logins take turns (`engine.lanes.LaneScheduler`, `login_share`).
- upload bytes per day: `max_upload_bytes_per_day` (64 MB), page uploads and `/v1/audio`
  together; 429 (`DailyBytes`, counted in `web.edge.security` and `web.openai.audio`).
- places on the speech pools: `SPEECH_SHARE` (1) per login; a login's next call waits for its
  last, so logins take turns (`speech.pools.SpeechPools.share`).
- bytes kept in the store: `max_disk_bytes_per_user` (256 MB) of its turns' and jobs' text;
  past it the next turn, job or page upload is refused (429, the page's message, gr.Error)
  and nothing stored is deleted (`disk_refusal`; checked in `turns.pipeline`, `jobs.JobQueue`
  and `web.edge.security`).

Disk per login: what a login keeps is its conversations and jobs (counted by the store's
triggers as they are written, so a check reads one row) and its uploads (Gradio's cache, swept
of files older than `cache_max_age_s`, a day, so `max_upload_bytes_per_day` bounds them).

Counts live in the process's memory: a restart starts them again (the day's upload count too);
the disk's is the store's own, kept across restarts and processes.
No code here knows about Gradio or HTTP; the callers turn a refusal into their answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assistant.errors import BadInput

CALLS_PER_LOGIN = 2
"""Two tabs of one person; a third is refused."""
CALLS = 8
"""In all: each call holds a VAD state and takes turns on the one speech-to-text pool."""
SPEECH_SHARE = 1
"""A login's calls on the speech pools at once: the pools serve first come, first served, so
without a share one login's eight long uploads put another's short clip behind all of them
(0.9 s alone, 181 s beside them; issue 38)."""
DAY_S = 86400.0


def check_text(text: str, limit: int) -> str:
    """A turn's text as the engine will see it, or BadInput with the reason (`max_text_chars`:
    every way in checks it before it opens a conversation, the turn again)."""
    text = (text or "").strip()
    if not text:
        raise BadInput("the message is empty")
    if len(text) > limit:
        raise BadInput(f"the message is too long ({len(text)} characters; the limit is {limit})")
    return text


class Counted:
    """Things held at once: at most `per_login` of one login's and `total` in all; `enter`
    says why not (None: admitted, call `leave` once done)."""

    def __init__(
        self,
        per_login: int,
        total: int | None,
        *,
        full: Callable[[int], str],
        mine: Callable[[int], str],
    ):
        self.per_login, self.total = per_login, total
        self.full, self.mine = full, mine
        self.open: dict[str, int] = {}

    def enter(self, owner: str) -> str | None:
        if self.total is not None and sum(self.open.values()) >= self.total:
            return self.full(self.total)
        if self.open.get(owner, 0) >= self.per_login:
            return self.mine(self.per_login)
        self.open[owner] = self.open.get(owner, 0) + 1
        return None

    def leave(self, owner: str) -> None:
        self.open[owner] -= 1
        if not self.open[owner]:
            del self.open[owner]


def calls(per_login: int = CALLS_PER_LOGIN, total: int = CALLS) -> Counted:
    return Counted(
        per_login,
        total,
        full=lambda n: f"the app has {n} calls open, its limit; try again in a moment",
        mine=lambda n: (
            f"you already have {n} calls open (another tab?); end one to start a new one"
        ),
    )


def api_requests(per_login: int, total: int) -> Counted:
    """`/v1` requests running at once (`max_api_per_user`, `max_queue`)."""
    return Counted(
        per_login,
        total,
        full=lambda n: f"{n} requests are already running; try again soon",
        mine=lambda n: (
            f"you already have {n} requests running (max_api_per_user); "
            "try again when one has ended"
        ),
    )


def jobs_refusal(active: int, limit: int) -> str | None:
    """Why a login with `active` jobs queued or running gets no other (`max_jobs_per_user`)."""
    if active < limit:
        return None
    return (
        f"you already have {limit} jobs queued or running (max_jobs_per_user); "
        "wait for one to finish or cancel one"
    )


def turns_refusal(held: int, limit: int) -> str | None:
    """Why a login with `held` page or Gradio API events waiting or running gets no other
    (`max_turns_per_user`): without it one login filled Gradio's queue and every other login
    got "Queue is full" (issue 38)."""
    if held < limit:
        return None
    return (
        f"you already have {limit} turns waiting or running (max_turns_per_user); "
        "try again when one has ended"
    )


def disk_refusal(settings: Any, owner: str, measure: Callable[[str], int]) -> str | None:
    """Why `owner` may store nothing more now (`max_disk_bytes_per_user`), or None. `measure`:
    the login's stored bytes (`Store.disk_bytes`, one row), read only when a limit applies:
    with logins (without, the one user is the machine's own) and a limit other than 0."""
    limit = int(settings.max_disk_bytes_per_user)
    if not settings.auth or limit <= 0:
        return None
    used = measure(owner)
    if used < limit:
        return None
    return (
        f"you are keeping {used:,} bytes of conversations and jobs; the limit is {limit:,} "
        "bytes a login (max_disk_bytes_per_user): delete conversations you no longer need"
    )


@dataclass
class DailyBytes:
    """Upload bytes per login over a day (`max_upload_bytes_per_day`), from its first upload
    of that day; `clock`: seconds (tests give their own)."""

    limit: int
    clock: Callable[[], float] = time.monotonic
    _days: dict[str, tuple[float, int]] = field(default_factory=dict)

    def used(self, owner: str) -> int:
        start, used = self._days.get(owner, (0.0, 0))
        return used if self.clock() - start < DAY_S else 0

    def refusal(self, owner: str, more: int = 0) -> str | None:
        """Why `more` bytes of `owner`'s are refused now, or None."""
        used = self.used(owner)
        if used + more <= self.limit and used < self.limit:
            return None
        return (
            f"you have uploaded {used:,} bytes today; the limit is {self.limit:,} bytes a day "
            "(max_upload_bytes_per_day)"
        )

    def add(self, owner: str, n: int) -> None:
        now = self.clock()
        start, used = self._days.get(owner, (now, 0))
        if now - start >= DAY_S:
            start, used = now, 0
        self._days[owner] = (start, used + n)
        if len(self._days) > 10_000:  # logins are few; stale days go
            self._days = {k: v for k, v in self._days.items() if now - v[0] < DAY_S}


_uploads: dict[int, DailyBytes] = {}


def uploads(settings: Any) -> DailyBytes:
    """The process's count of upload bytes for `settings.max_upload_bytes_per_day` (one per
    limit: the page's uploads and `/v1/audio` count against the same day)."""
    limit = int(settings.max_upload_bytes_per_day)
    if limit not in _uploads:
        _uploads[limit] = DailyBytes(limit)
    return _uploads[limit]


def held_events(queue: Any, owner: str) -> int:
    """`owner`'s turns in Gradio's queue, waiting or running (Gradio keeps each event in
    `event_ids_to_events` from its push to its end)."""
    events = list(queue.event_ids_to_events.values())
    return sum(1 for e in events if e.username == owner and is_turn(e.fn))


TURN_FUNCTIONS = frozenset({"chat", "delegate", "voice", "transcribe"})
"""The Gradio functions that are turns (the page's and the Gradio API's): the only events the
cap counts and refuses. Saving a setting, a timer's refresh or opening a conversation is never
refused for a login's turns (on a busy machine the page's own refreshes and two quick saves
filled the cap, and a voice setting was refused, lost after a reload)."""


def is_turn(fn: Any) -> bool:
    """Whether Gradio's `fn` (a `BlockFunction`) runs a turn."""
    return getattr(getattr(fn, "fn", None), "__name__", "") in TURN_FUNCTIONS


def cap_page_turns(queue: Any, limit: int) -> bool:
    """Refuse a login's next Gradio turn (a chat, voice or API turn) while it has `limit`
    waiting or running: 429 with the limit's name, which Gradio's page shows. False when the
    queue is not the one this was written for (then nothing is capped)."""
    if not hasattr(queue, "event_ids_to_events") or not hasattr(queue, "push"):
        return False
    from fastapi import HTTPException
    from gradio import route_utils

    push = queue.push

    async def capped_push(body: Any, request: Any, username: str | None) -> Any:
        if username is not None:
            try:
                turn = is_turn(route_utils.get_fn(queue.blocks, None, body))
            except Exception:  # no such function or session: Gradio's own push says so
                turn = False
            why = turns_refusal(held_events(queue, username), limit) if turn else None
            if why is not None:
                raise HTTPException(status_code=429, detail=why)
        return await push(body=body, request=request, username=username)

    queue.push = capped_push
    return True
