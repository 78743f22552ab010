"""The Jobs panel and job notices: a table (a list at phone widths) refreshed by a timer,
a result viewer, actions.

A finished job also leaves a short notice in the chat (spoken when voice is on; during a call,
said in the call). Notices are taken once (`JobQueue.take_ended`), by whichever of the
owner's sessions polls first.
"""

from __future__ import annotations

import html
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from assistant.call.calls import Calls
from assistant.datadir import write_private
from assistant.errors import AssistantError
from assistant.jobs import JobQueue
from assistant.records import Job
from assistant.session.notices import Notices
from assistant.settings import Settings
from assistant.speech.audio import wav_bytes
from assistant.speech.pools import speech_pools
from assistant.web.edge.identity import owner_of
from assistant.web.page.turns import SpeechModels, Tab, voice_of

HEADERS = ["id", "state", "elapsed", "tokens", "task"]
# wide enough at desk widths that no header or value breaks inside a word; the task takes the
# rest and wraps (phone widths get the list instead)
COLUMN_WIDTHS = ["13%", "10%", "8%", "17%", "52%"]
REFRESH_S = 2.0
_ID = re.compile(r"^[0-9a-f]{6,32}$")


@dataclass(frozen=True)
class JobRow:
    """One job as the panel lists it."""

    id: str
    state: str
    elapsed: str
    tokens: str
    task: str

    def cells(self) -> list[str]:
        return [self.id, self.state, self.elapsed, self.tokens, self.task]


def job_rows(jobs: list[Job], now: float | None = None) -> list[JobRow]:
    now = time.time() if now is None else now
    rows = []
    for j in jobs:
        # a running job's elapsed time is saved at each heartbeat; show it live in between
        elapsed = j.elapsed_s + (now - j.updated_at if j.state == "running" else 0.0)
        tokens = f"{j.answer_tokens + j.reasoning_tokens}"
        if j.reasoning_tokens:
            tokens += f" ({j.reasoning_tokens} thinking)"
        task = " ".join(j.prompt.split())
        task = task if len(task) <= 160 else task[:157] + "..."
        rows.append(JobRow(j.id, j.state, f"{elapsed:.0f} s", tokens, task))
    return rows


def job_list_html(rows: list[JobRow]) -> str:
    """The same rows as a list of cards, for phone widths where a table cannot fit."""
    if not rows:
        return "<p class='jobs-empty'>No jobs yet. Delegate a task to start one.</p>"
    items = [
        f"<li><b>{html.escape(r.task)}</b><br><span>{r.id} · {r.state} · {r.elapsed} · "
        f"{html.escape(r.tokens)} tokens</span></li>"
        for r in rows
    ]
    return "<ul class='jobs-list'>" + "".join(items) + "</ul>"


def job_markdown(job: Job) -> str:
    """A job as the viewer shows it (and as the downloaded .md holds it)."""
    head = f"### Job {job.id}: {job.state}\n\n**Task:** {job.prompt}\n\n"
    stats = (
        f"*{job.elapsed_s:.1f} s, {job.reasoning_tokens} reasoning and {job.answer_tokens} "
        f"answer tokens, budget {job.budget}*\n\n"
    )
    body = job.result or ("*(no answer yet)*" if job.state in ("queued", "running") else "")
    if job.error:
        body += f"\n\n**Error:** {job.error}"
    return head + stats + body


@dataclass
class JobsPanel:
    """The panel's components."""

    table: gr.Dataframe
    listing: gr.HTML
    selected: gr.Dropdown
    view: gr.Markdown
    download: gr.DownloadButton
    cancel: gr.Button
    retry: gr.Button
    timer: gr.Timer


def build_jobs_panel() -> JobsPanel:
    gr.Markdown("### Jobs")
    table = gr.Dataframe(
        headers=HEADERS,
        value=[],
        interactive=False,
        wrap=True,
        column_widths=COLUMN_WIDTHS,
        elem_id="jobs-table",
    )
    listing = gr.HTML(job_list_html([]), elem_id="jobs-list")
    selected = gr.Dropdown(
        label="Job", choices=[], value=None, allow_custom_value=False, elem_id="jobs-selected"
    )
    view = gr.Markdown()
    with gr.Row():
        download = gr.DownloadButton("Download .md", value=None, size="sm")
        cancel = gr.Button("Cancel", size="sm", variant="stop")
        retry = gr.Button("Retry with bigger budget", size="sm")
    return JobsPanel(table, listing, selected, view, download, cancel, retry, gr.Timer(REFRESH_S))


class Jobs:
    """The panel's callbacks; every one is scoped to the caller's own jobs."""

    def __init__(
        self,
        jobs: JobQueue,
        settings: Settings,
        speech: SpeechModels,
        prefs: Callable[[str], dict[str, Any]] = lambda owner: {},
        calls: Calls | None = None,
    ):
        self.jobs = jobs
        self.notices_of = Notices(jobs, calls or Calls())
        """Where a notice goes: the owner's call, if one is open, else this page."""
        self.settings = settings
        self.speech = speech
        self.prefs = prefs
        """A user's voice settings: notices are spoken in the voice their replies use."""
        self.downloads = Path(tempfile.mkdtemp(prefix="assistant-jobs-"))

    def _job(self, job_id: str | None, request: gr.Request | None) -> Job | None:
        if not job_id or not _ID.match(job_id):
            return None
        return self.jobs.get(job_id, owner_of(self.settings, request))

    def refresh(self, job_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        """Timer tick: table, list, selector choices (selection kept), viewer, download."""
        jobs = self.jobs.owned(owner_of(self.settings, request), limit=50)
        rows = job_rows(jobs)
        listed = ([r.cells() for r in rows], job_list_html(rows))
        ids = [j.id for j in jobs]
        if job_id in ids:
            return *listed, gr.Dropdown(choices=ids), *self.show(job_id, request)
        if job_id:  # the selected job left the list
            return *listed, gr.Dropdown(choices=ids, value=None), "", None
        # nothing selected, or a click came after this tick read the selection: leave it be
        return *listed, gr.Dropdown(choices=ids), gr.skip(), gr.skip()

    def show(self, job_id: str | None, request: gr.Request) -> tuple[Any, Any]:
        """Viewer and download for the selected job."""
        job = self._job(job_id, request)
        if job is None:
            return "", None
        text = job_markdown(job)
        path = None
        if job.state in ("done", "failed"):
            path = self.downloads / f"job-{job.id}.md"
            if not path.exists() or path.read_text() != text:
                write_private(path, text)
        return text, str(path) if path else None

    def pick(self, evt: gr.SelectData) -> Any:
        """A click on a table row selects that job."""
        row = evt.row_value if isinstance(evt.row_value, list) else None
        return row[0] if row else gr.skip()

    def cancel(self, job_id: str | None, request: gr.Request) -> None:
        job = self._job(job_id, request)
        if job is None:
            raise gr.Error("select one of your jobs first")
        if not self.jobs.cancel(job.id, job.owner):
            raise gr.Error(f"job {job.id} is {job.state}; only queued or running jobs cancel")
        gr.Info(f"job {job.id} cancelled")

    async def retry(self, job_id: str | None, request: gr.Request) -> None:
        # async: the retry wakes the job worker, whose event lives on this loop
        job = self._job(job_id, request)
        if job is None:
            raise gr.Error("select one of your jobs first")
        try:
            job = self.jobs.retry(job.id, job.owner, bigger=True)
        except AssistantError as e:
            raise gr.Error(str(e)) from e
        gr.Info(f"job {job.id} queued again with a budget of {job.budget} tokens")

    async def notices(
        self, history: list[dict[str, Any]], tab: Tab, speak: bool, request: gr.Request
    ) -> tuple[Any, Any]:
        """Timer tick: a notice in the chat for each of this user's jobs that ended."""
        # the chat value this tick carries was read when it fired; a turn that ends while
        # the notice is being spoken makes it stale, and writing it back would drop the
        # turn's reply. Then the notices wait for the next tick (or the next turn's end).
        turns = tab.turns_ended
        owner = owner_of(self.settings, request)
        delivered = await self.notices_of.deliver(owner, tab.conversation_id)
        tab.pending += [{"role": "assistant", "content": t} for t in delivered.shown]
        said = delivered.to_say
        audio = await self._say(said, owner) if speak and said else None
        stale = tab.busy or tab.turns_ended != turns
        if stale or not tab.pending:
            # a running turn appends the pending notices when it ends
            return gr.skip(), audio if audio else gr.skip()
        messages, tab.pending = list(tab.pending), []
        return [*(history or []), *messages], audio if audio else gr.skip()

    async def _say(self, text: str, owner: str) -> bytes | None:
        tts = await voice_of(self.speech, self.prefs(owner))
        if tts is None:
            return None
        try:
            pools = speech_pools()
            async with pools.share(owner):  # a notice waits its turn like a reply
                chunks = await pools.synthesize(tts, text)
        except AssistantError as e:  # a speech server down: the notice is still shown
            gr.Warning(f"The notice could not be spoken: {e}")
            return None
        if not chunks:
            return None
        return wav_bytes(b"".join(c.samples for c in chunks), chunks[0].sample_rate)
