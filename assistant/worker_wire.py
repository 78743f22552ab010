"""The link between the app and its job worker: the first message (`Hello`: the app's
settings) and newline-delimited JSON both ways over one socket (`Wire`); what the messages say
is in `assistant.worker`."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import pickle
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from assistant.settings import Settings


@dataclass(frozen=True)
class Hello:
    """The first message to a linked worker: the app's settings, read once there."""

    settings: Settings
    embedded: bool
    """The engine at `settings.engine_url` is the app's embedded llama.cpp: prompted as a
    transcript, one slot, and never probed (a request interrupts its generation)."""
    lanes: bool = True
    """False: no lane scheduling (the QoS bench's baseline)."""

    def encode(self) -> bytes:
        return base64.b64encode(pickle.dumps(self)) + b"\n"

    @staticmethod
    def decode(line: bytes) -> Hello:
        # the link is a socket pair between a parent and the child it started: trusted
        return pickle.loads(base64.b64decode(line))


class Wire:
    """Newline-delimited JSON messages both ways over one stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer

    def send(self, **message: Any) -> None:
        if not self.writer.is_closing():
            self.writer.write(json.dumps(message).encode() + b"\n")

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        """Until the other side closes."""
        while line := await self.reader.readline():
            with contextlib.suppress(ValueError):
                yield json.loads(line)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self.writer.wait_closed()


async def wire_of(sock: socket.socket) -> Wire:
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=2**20)
    return Wire(reader, writer)
