"""The named API endpoints (`gradio_client`): chat, delegate, jobs, transcribe.

    client.predict("hello", api_name="/chat")        -> {"reply", "lane", "reason", ...}
    client.predict("task", api_name="/delegate")     -> the job
    client.predict(api_name="/jobs")                 -> [job, ...]
    client.predict(handle_file("a.flac"), api_name="/transcribe") -> {"text", ...}

Identity is the login (or "local" without one), exactly as on the page.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from assistant.errors import AssistantError, BadInput
from assistant.jobs import JobQueue
from assistant.limits import check_text
from assistant.session import Ask, Sessions
from assistant.session.voice import heard
from assistant.settings import Settings
from assistant.web.edge.identity import owner_of
from assistant.web.page.turns import SpeechModels


class Api:
    """The endpoint functions. Errors a user can read become `gr.Error`."""

    def __init__(
        self,
        sessions: Sessions,
        jobs: JobQueue,
        settings: Settings,
        speech: SpeechModels,
    ):
        self.sessions = sessions
        self.queue = jobs
        self.settings = settings
        self.speech = speech

    async def chat(
        self, text: str, conversation_id: str = "", deep: bool = False, request: gr.Request = None
    ) -> dict:
        """One typed turn through the router. A deep decision queues a job (see job_id).

        Pass the returned conversation_id back to continue the same conversation."""
        owner = owner_of(self.settings, request)
        try:
            # refused text must not leave an empty conversation behind
            text = check_text(text, self.settings.max_text_chars)
            session = self.sessions.of(owner, conversation_id or None, strict=True,
                                       title=text[:80])  # fmt: skip
            result = await session.run(Ask(text=text, force_deep=deep, source="api"))
            if result is None:
                raise BadInput("the turn was stopped")
        except AssistantError as e:
            raise gr.Error(str(e)) from e
        return {**result.as_json(), "conversation_id": session.conversation_id}

    async def delegate(self, text: str, key: str = "", request: gr.Request = None) -> dict:
        """Queue a deep-lane job; the same key gives back the same job (idempotent)."""
        # async: submitting wakes the job worker, whose event lives on the server's loop
        owner = owner_of(self.settings, request)
        try:
            text = check_text(text, self.settings.max_text_chars)
            job = self.sessions.none(owner).delegate(text, key or None)
        except AssistantError as e:
            raise gr.Error(str(e)) from e
        return _public(job.as_json())

    def jobs(self, request: gr.Request = None) -> list:
        """The caller's jobs, newest first (without their reasoning)."""
        return [_public(j.as_json()) for j in self.queue.owned(owner_of(self.settings, request))]

    async def transcribe(self, audio_path: str | None, request: gr.Request = None) -> dict:
        """Speech to text: {"text", "language", "duration_s", "stt_ms"}."""
        if not audio_path:
            raise gr.Error("no audio file")
        owner = owner_of(self.settings, request)  # in the login's turn on the pool
        try:
            stt = await self.speech.stt()
            transcript = await heard(audio_path, stt, self.settings, owner)
        except AssistantError as e:
            raise gr.Error(str(e)) from e
        return transcript.as_json()


def _public(job: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in job.items() if k not in ("reasoning", "idempotency_key")}


def add_api(api: Api) -> Api:
    """Register the endpoints in the current Blocks."""
    gr.api(api.chat, api_name="chat")
    gr.api(api.delegate, api_name="delegate")
    gr.api(api.jobs, api_name="jobs", queue=False)
    # transcribe takes a file: a real (hidden) Audio component checks and caches the upload
    with gr.Column(visible=False):
        audio = gr.Audio(sources=["upload"], type="filepath", label="audio")
        out = gr.JSON(label="transcript")
        go = gr.Button("transcribe")
    go.click(api.transcribe, inputs=audio, outputs=out, api_name="transcribe")
    return api
