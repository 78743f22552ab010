"""Wyoming events on one connection: read within bounds, written one at a time.

An event is a JSON line, then `data_length` bytes of more JSON, then `payload_length` bytes
(audio). The `wyoming` library's reader takes both lengths on trust, so a client could make
the app buffer gigabytes: events are read here with every length checked before a byte of it
is read (the header line by the stream's own limit), and written with the library's writer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from wyoming.error import Error
from wyoming.event import Event, async_write_event

MAX_HEADER_BYTES = 64 * 1024
"""The JSON line: a few hundred bytes from Home Assistant (the stream's line limit)."""
MAX_DATA_BYTES = 64 * 1024
"""An event's extra JSON: a synthesize or transcript event's text, at most `max_text_chars`."""
MAX_PAYLOAD_BYTES = 1024 * 1024
"""One audio chunk: Home Assistant and satellites send a few kilobytes at a time; this is over
ten seconds of 48 kHz stereo."""


class WireError(Exception):
    """The client broke the protocol; the message says how, the `code` names it."""

    def __init__(self, text: str, code: str = "bad-event"):
        super().__init__(text)
        self.code = code


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event; None when the client has closed the connection."""
    try:
        line = await reader.readline()
    except ValueError as e:  # the stream's limit: a line longer than MAX_HEADER_BYTES
        raise WireError(f"an event header is longer than {MAX_HEADER_BYTES} bytes",
                        "too-large") from e  # fmt: skip
    if not line:
        return None
    if not line.endswith(b"\n"):
        return None  # the client left in the middle of a header
    try:
        header = json.loads(line)
    except ValueError as e:
        raise WireError("an event header is not JSON") from e
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise WireError("an event header has no type")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise WireError("an event's data is not an object")
    extra = _length(header, "data_length", MAX_DATA_BYTES)
    size = _length(header, "payload_length", MAX_PAYLOAD_BYTES)
    try:
        if extra:
            more = json.loads(await reader.readexactly(extra))
            if not isinstance(more, dict):
                raise WireError("an event's data is not an object")
            data.update(more)
        payload = await reader.readexactly(size) if size else None
    except asyncio.IncompleteReadError:
        return None  # the client left in the middle of an event
    except ValueError as e:
        raise WireError("an event's data is not JSON") from e
    return Event(type=header["type"], data=data, payload=payload)


def _length(header: dict[str, Any], key: str, limit: int) -> int:
    value = header.get(key)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WireError(f"{key} is not a length")
    if value > limit:
        raise WireError(f"{key} {value} is over the limit of {limit} bytes", "too-large")
    return value


class Writer:
    """The connection's writer: the reader and the request's task write through it, one event
    at a time; a client gone is noted, not raised (there is nobody left to tell)."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.lock = asyncio.Lock()
        self.gone = False

    async def send(self, event: Event) -> bool:
        """Write `event`; False when the client has gone."""
        if self.gone:
            return False
        async with self.lock:
            try:
                await async_write_event(event, self.writer)
            except (ConnectionError, RuntimeError):
                self.gone = True
        return not self.gone

    async def error(self, text: str, code: str) -> None:
        """Say what went wrong (Wyoming's `error` event); the caller then closes."""
        await self.send(Error(text=text, code=code).event())

    async def close(self) -> None:
        self.writer.close()
        try:
            async with asyncio.timeout(2.0):
                await self.writer.wait_closed()
        except (TimeoutError, ConnectionError):
            pass
