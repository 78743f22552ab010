"""The engine client's sockets: plain asyncio streams under httpx, in place of anyio's.

httpx reads a streamed answer one network read per arriving chunk, and each read through
httpcore's anyio backend opens a cancel scope for its timeout and stops and restarts the
socket's reader (two `epoll_ctl` calls), and a pooled connection is checked with a `select`
before reuse: measured about half of the engine reader's CPU per reply. Here a read takes what
an `asyncio.Protocol` has buffered, or waits for it under one timer; a pooled connection is
readable when its protocol holds bytes or saw the end. Timeouts and failures are httpcore's own
exceptions, so httpx and the `openai` client report them as before. Proxies set in the
environment keep httpx's own transports.
"""

# httpcore's interface passes each call its timeout (ASYNC109)
# ruff: noqa: ASYNC109
from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

log = logging.getLogger(__name__)

HIGH_WATER = 1 << 20
"""Bytes buffered unread before the socket stops being read (a reader that fell behind)."""
HAPPY_EYEBALLS_S = 0.25
"""As anyio does: the next address of a name is tried when the first is this slow to answer."""


class _Buffered(asyncio.Protocol):
    """What arrived and was not read yet, and whether the peer closed."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.ended = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.error = exc
        self._wake()
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def pause_writing(self) -> None:
        self.drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.drained = None

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


def _expire(waiter: asyncio.Future[None], error: type[Exception]) -> None:
    if not waiter.done():
        waiter.set_exception(error())


class Stream(httpcore.AsyncNetworkStream):
    """One connection to the engine, as httpcore reads and writes it."""

    def __init__(self, transport: asyncio.Transport, protocol: _Buffered) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        p = self._protocol
        if not p.buffer and not p.ended:
            loop = asyncio.get_running_loop()
            p.waiter = waiter = loop.create_future()
            timer = (
                None
                if timeout is None
                else loop.call_later(timeout, _expire, waiter, httpcore.ReadTimeout)
            )
            try:
                await waiter
            finally:
                p.waiter = None
                if timer is not None:
                    timer.cancel()
        if p.buffer:
            data = bytes(p.buffer[:max_bytes])
            del p.buffer[:max_bytes]
            if p.paused and len(p.buffer) <= HIGH_WATER // 2:
                p.paused = False
                self._transport.resume_reading()
            return data
        if p.error is not None:
            raise httpcore.ReadError(str(p.error) or type(p.error).__name__)
        return b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        p = self._protocol
        if p.ended or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        if p.drained is not None:
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(p.drained)
            except TimeoutError:
                raise httpcore.WriteTimeout() from None
        if p.error is not None:
            raise httpcore.WriteError(str(p.error))

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> Stream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            self._transport.close()
            raise httpcore.ConnectTimeout() from None
        except (OSError, ssl.SSLError) as e:
            self._transport.close()
            raise httpcore.ConnectError(str(e)) from e
        if transport is None:
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        return Stream(transport, self._protocol)  # type: ignore[arg-type]

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # a pooled connection the server closed, or wrote to
            return bool(self._protocol.buffer) or self._protocol.ended
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None


class Backend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend on asyncio's own transports."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Stream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Buffered, host, port, local_addr=local, happy_eyeballs_delay=HAPPY_EYEBALLS_S
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout() from None
        except OSError as e:
            raise httpcore.ConnectError(str(e) or type(e).__name__) from e
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return Stream(transport, protocol)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Stream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(_Buffered, path)
        except TimeoutError:
            raise httpcore.ConnectTimeout() from None
        except OSError as e:
            raise httpcore.ConnectError(str(e) or type(e).__name__) from e
        return Stream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def lean_client(**kwargs: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` whose own connection pool uses `Backend`. The pool's backend is
    a private attribute of httpcore 1.0 (pinned); if it is gone the client keeps anyio's, with
    a warning, and a test fails."""
    client = httpx.AsyncClient(**kwargs)
    pool = getattr(client._transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = Backend()
    else:
        log.warning("httpcore's pool has no _network_backend; the engine reads through anyio")
    return client
