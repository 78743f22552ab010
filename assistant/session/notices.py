"""Notices of a login's ended jobs: the one path by which they reach the person.

A job ends in the worker; its notice is taken once (`JobQueue.take_ended`) and goes where the
person is: said in their call when one is open (the call says it once it is quiet, never over
the person or a reply), else shown on the page and, with voice on, spoken there. The page
asks on its timer because Gradio has no push to an open page; a call is told from here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from assistant.call.calls import Calls

if TYPE_CHECKING:
    from assistant.jobs import JobQueue
    from assistant.records import Job


@dataclass(frozen=True)
class Notice:
    shown: str
    """The chat message."""
    said: str
    """What is said aloud."""


def notice_of(job: Job) -> Notice:
    if job.state == "done":
        first = next((ln.strip("# ").strip() for ln in job.result.splitlines() if ln.strip()), "")
        first = first if len(first) <= 120 else first[:117] + "..."
        return Notice(f"✅ Job {job.id} is done: {first}", "Your delegated job is done.")
    return Notice(f"❌ Job {job.id} failed: {job.error}", "Your delegated job failed.")


@dataclass(frozen=True)
class Delivered:
    shown: list[str]
    """Messages for the page's chat."""
    to_say: str
    """What the page says aloud ("" when a call said it, or nothing ended)."""


class Notices:
    def __init__(self, jobs: JobQueue, calls: Calls):
        self.jobs, self.calls = jobs, calls

    async def deliver(self, owner: str, conversation_id: str | None) -> Delivered:
        """`owner`'s jobs that ended since last asked, each once: said in the login's call if
        one is open, and what the page shows and says."""
        ended = await asyncio.to_thread(self.jobs.take_ended, owner)
        notices = [notice_of(job) for job in ended]
        said = " ".join(n.said for n in notices)
        call = self.calls.of(owner, conversation_id) if said else None
        if call is not None:  # said in the call: the page's player would be heard as speech
            call.announce(said)
            said = ""
        return Delivered([n.shown for n in notices], said)
