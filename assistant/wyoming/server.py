"""`assistant serve --wyoming [HOST:]PORT`: the Wyoming server, on the app's own event loop.

Each connection is read one event at a time (`wire`, within its bounds) and each request runs
as a task the connection keeps, while the connection goes on reading (a streamed synthesis
takes its text as it comes; a client that leaves is seen at once, and its request stopped):
`describe` -> `info`; `transcribe`/`audio-*` -> `hearing`; `synthesize*` -> `speaking`;
`transcript` -> `handling`; `ping` -> `pong`; any other event type is dropped, as Wyoming's
servers do. One request at a time per connection (Home Assistant opens one per request).

Refused, with Wyoming's `error` event and the connection closed (Home Assistant's speech
clients would otherwise wait for an answer): a peer that is neither loopback nor on the
allow-list, any request when no login is configured, a login over its share of connections
(`max_api_per_user`, and `CONNECTIONS` in all), events over their size, out of order or
malformed, audio in a format not taken or too long, a connection idle for `IDLE_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from wyoming.asr import Transcribe, Transcript, TranscriptStop
from wyoming.asr import Transcript as Heard
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from assistant.errors import AssistantError
from assistant.limits import Counted
from assistant.limits import uploads as uploads_per_day
from assistant.wyoming import access
from assistant.wyoming.handling import Handling
from assistant.wyoming.hearing import Chunks, Hearing, hotwords, transcribe
from assistant.wyoming.info import build_info
from assistant.wyoming.speaking import Speaking, voice_for
from assistant.wyoming.wire import MAX_HEADER_BYTES, WireError, Writer, read_event

if TYPE_CHECKING:
    from assistant.runtime import Runtime
    from assistant.speech.models import SpeechModels

log = logging.getLogger(__name__)

IDLE_S = 30.0
"""A connection with no request running that sends nothing for this long is closed."""
CONNECTIONS = 32
"""Wyoming connections open at once, in all."""


def listening_socket(host: str, port: int) -> socket.socket:
    """The port, bound now (so a port in use is a one-line error before anything starts);
    served later on the app's loop. OSError says why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    info = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)[0]
    sock = socket.socket(info[0], socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(64)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class WyomingServer:
    """The Wyoming port of runtime `rt`, with the app's speech models `speech`."""

    def __init__(self, rt: Runtime, speech: SpeechModels):
        self.rt, self.speech, self.settings = rt, speech, rt.settings
        self.owner = access.login(self.settings)
        self.clients = access.Clients(self.settings.wyoming_clients)
        self.open = Counted(
            self.settings.max_api_per_user,
            CONNECTIONS,
            full=lambda n: f"{n} Wyoming connections are open, the limit; try again soon",
            mine=lambda n: (
                f"the login has {n} requests running (max_api_per_user); "
                "try again when one has ended"
            ),
        )
        self.handling = Handling(rt.sessions, rt.conversations, rt.store.conversation_job)
        self._info: Event | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self, sock: socket.socket) -> None:
        """Serve on `sock` (`listening_socket`) until `stop`."""
        self._server = await asyncio.start_server(self._accept, sock=sock,
                                                  limit=MAX_HEADER_BYTES)  # fmt: skip

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    async def info(self) -> Event:
        if self._info is None:  # reads the voices' configs: once, off the loop
            self._info = (await asyncio.to_thread(build_info, self.settings)).event()
        return self._info

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        out = Writer(writer)
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if peer else ""
        try:
            if not self.clients.allows(host):
                log.warning("wyoming: refused %s (not on ASSISTANT_WYOMING_CLIENTS)", host)
                await out.error(f"{host} may not use this port (ASSISTANT_WYOMING_CLIENTS)",
                                "forbidden")  # fmt: skip
                return
            if self.owner is None:
                await out.error("no login is set for Wyoming: set ASSISTANT_WYOMING_USER",
                                "no-login")  # fmt: skip
                return
            if why := self.open.enter(self.owner):
                await out.error(why, "over-limit")
                return
            try:
                await Connection(self, self.owner, reader, out).run()
            finally:
                self.open.leave(self.owner)
        except Exception:  # never a crash: the connection ends, the app goes on
            log.exception("wyoming: connection from %s failed", host)
        except asyncio.CancelledError:
            pass  # the server stops (`stop`): this is the connection's outermost task
        finally:
            await out.close()
            if task is not None:
                self._connections.discard(task)


class Connection:
    """One client's connection: its events in order, its one request at a time."""

    def __init__(self, server: WyomingServer, owner: str, reader: asyncio.StreamReader,
                 out: Writer):  # fmt: skip
        self.server, self.owner, self.reader, self.out = server, owner, reader, out
        settings = server.settings
        self.day = uploads_per_day(settings) if settings.auth else None
        self.work: asyncio.Task[None] | None = None
        self.hearing: Hearing | None = None
        self.chunks: Chunks | None = None
        self.speaking: Speaking | None = None

    @property
    def busy(self) -> bool:
        running = self.work is not None and not self.work.done()
        return (
            running
            or self.speaking is not None
            or (self.hearing is not None and self.hearing.format is not None)
        )

    async def run(self) -> None:
        reading: asyncio.Task[Event | None] | None = None
        try:
            while True:
                if reading is None:
                    reading = asyncio.ensure_future(read_event(self.reader))
                done, _ = await asyncio.wait({reading}, timeout=IDLE_S)
                if not done:
                    if self.work is not None and not self.work.done():
                        continue  # a request is running: its client waits for it
                    await self.out.error(f"nothing received for {IDLE_S:.0f} s", "idle")
                    return
                event, reading = reading.result(), None
                if event is None:
                    return  # the client has gone (its request, if any, stops with it)
                await self.dispatch(event)
        except WireError as e:
            log.info("wyoming: %s (%s); the connection ends", e, e.code)
            await self.out.error(str(e), e.code)
        finally:
            if reading is not None:
                reading.cancel()
            await self.end()

    async def end(self) -> None:
        for running in (self.work,):
            if running is not None and not running.done():
                running.cancel()
                with contextlib.suppress(BaseException):
                    await running
        if self.chunks is not None:
            await self.chunks.stop()

    async def dispatch(self, event: Event) -> None:
        kind = event.type
        try:
            if Describe.is_type(kind):
                await self.out.send(await self.server.info())
            elif Ping.is_type(kind):
                await self.out.send(Pong(text=Ping.from_event(event).text).event())
            elif Transcript.is_type(kind):
                self._idle("transcript")
                heard = Heard.from_event(event)
                if not isinstance(heard.text, str):
                    raise WireError("a transcript's text must be text")
                self._start(self.server.handling.handle(self.owner, heard, self.out.send))
            elif kind.startswith("audio-") or Transcribe.is_type(kind):
                await self._hear(event)
            elif kind.startswith("synthesize"):
                await self._speak(event)
            # any other event (select-program, a satellite's) is dropped, as Wyoming says
        except (KeyError, TypeError, AttributeError) as e:
            raise WireError(f"a malformed {kind} event ({e!r} missing or wrong)") from e

    def _idle(self, what: str) -> None:
        if self.busy:
            raise WireError(f"{what} while another request runs on this connection; "
                            "one request at a time (open another connection)", "busy")  # fmt: skip

    def _start(self, request: Awaitable[None]) -> None:
        self.work = asyncio.create_task(self._run(request), name="wyoming-request")

    async def _run(self, request: Awaitable[None]) -> None:
        """A request: whatever goes wrong is said (`error`) and the connection closed."""
        try:
            await request
        except WireError as e:
            await self._fail(str(e), e.code)
        except AssistantError as e:
            await self._fail(str(e), "failed")
        except Exception as e:
            log.exception("wyoming: a request failed")
            await self._fail(f"the request failed: {e}", "internal")

    async def _fail(self, text: str, code: str) -> None:
        log.info("wyoming: %s (%s); the connection ends", text, code)
        await self.out.error(text, code)
        await self.out.close()  # the reader sees the end, and the connection ends

    async def _hear(self, event: Event) -> None:
        kind = event.type
        if Transcribe.is_type(kind):
            self._idle("transcribe")
            words = hotwords(Transcribe.from_event(event))
            self.hearing = Hearing(self.owner, self.server.settings.max_audio_s, self.day, words)
        elif AudioStart.is_type(kind):
            self._idle("audio-start")
            if self.hearing is None:  # `transcribe` is optional
                self.hearing = Hearing(self.owner, self.server.settings.max_audio_s, self.day)
            self.hearing.start(event)
            self.chunks = Chunks(self.out.send)
        elif AudioChunk.is_type(kind):
            if self.hearing is None or self.chunks is None:
                raise WireError("audio-chunk before audio-start", "out-of-order")
            self.hearing.add(event)
            self.chunks.heard_more(self.hearing, self.server.speech.stt)
        elif AudioStop.is_type(kind):
            if self.hearing is None or self.chunks is None or self.hearing.format is None:
                raise WireError("audio-stop before audio-start", "out-of-order")
            hearing, chunks, self.hearing = self.hearing, self.chunks, None
            self._start(self._transcript(hearing, chunks))

    async def _transcript(self, hearing: Hearing, chunks: Chunks) -> None:
        await chunks.stop()
        stt = await self.server.speech.stt()
        heard = await transcribe(hearing, stt)
        await chunks.finish(heard.text)
        await self.out.send(Transcript(text=heard.text, language=heard.language).event())
        await self.out.send(TranscriptStop().event())

    async def _speak(self, event: Event) -> None:
        kind, settings = event.type, self.server.settings
        if Synthesize.is_type(kind):
            if self.speaking is not None:
                return  # the whole text again, after its chunks: for servers that do not stream
            self._idle("synthesize")
            request = Synthesize.from_event(event)
            if not isinstance(request.text, str):
                raise WireError("synthesize's text must be text")
            speaking = Speaking(self.owner, self.out.send, settings.max_text_chars)
            speaking.count(request.text)
            self._start(self._whole(speaking, request))
        elif SynthesizeStart.is_type(kind):
            self._idle("synthesize-start")
            start = SynthesizeStart.from_event(event)
            self.speaking = Speaking(self.owner, self.out.send, settings.max_text_chars)
            self._start(self._stream(self.speaking, start))
        elif SynthesizeChunk.is_type(kind):
            if self.speaking is None:
                raise WireError("synthesize-chunk before synthesize-start", "out-of-order")
            text = SynthesizeChunk.from_event(event).text
            if not isinstance(text, str):
                raise WireError("synthesize-chunk's text must be text")
            self.speaking.feed(text)
        elif SynthesizeStop.is_type(kind):
            if self.speaking is None:
                raise WireError("synthesize-stop before synthesize-start", "out-of-order")
            self.speaking.end()
            self.speaking = None

    async def _voice(self, voice: Any) -> Any:
        prefs = self.server.rt.conversations.prefs(self.owner)
        return await voice_for(self.server.speech, self.server.settings, prefs, voice)

    async def _whole(self, speaking: Speaking, request: Synthesize) -> None:
        speaking.tts = await self._voice(request.voice)
        await speaking.whole(request.text)

    async def _stream(self, speaking: Speaking, start: SynthesizeStart) -> None:
        speaking.tts = await self._voice(start.voice)
        await speaking.stream()
