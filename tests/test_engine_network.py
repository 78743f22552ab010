"""The engine client's sockets (`engine.network`): httpx over asyncio's own transports reads,
reuses, times out and fails as it did over anyio's, against real loopback servers."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from assistant.engine import network
from assistant.engine.client import build_client
from assistant.engine.network import Backend, lean_client

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def request_of(reader: asyncio.StreamReader) -> bytes:
    """One request's head (the tests send bodies small enough to come with it)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n")
         if line.lower().startswith(b"content-length:")),
        0,
    )  # fmt: skip
    return head + await reader.readexactly(length)


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[dict]:
    """A loopback server; yields {"url", "connections"} (connections accepted so far)."""
    seen = {"connections": 0}

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    seen["url"] = f"{'https' if tls else 'http'}://127.0.0.1:{port}/"
    try:
        yield seen
    finally:
        server.close()


async def streamed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Each request answered with three events, written apart as an engine writes tokens;
    the connection kept for the next request."""
    while True:
        await request_of(reader)
        writer.write(HEAD)
        for i in range(3):
            writer.write(chunk(b"data: %d\n\n" % i))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def test_the_apps_engine_client_reads_through_asyncios_sockets() -> None:
    # build_client > LeanClient > AsyncOpenAI > httpx.AsyncClient > transport > pool
    http = build_client("http://127.0.0.1:9/v1", None)._client._client
    assert isinstance(http._transport._pool._network_backend, Backend)


async def test_a_stream_arrives_whole_and_the_connection_is_reused() -> None:
    async with serving(streamed) as server, lean_client(base_url=server["url"]) as http:
        for _ in range(2):
            async with http.stream("POST", "v1/chat/completions", json={"a": 1}) as r:
                body = b"".join([part async for part in r.aiter_bytes()])
            assert r.status_code == 200
            assert body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
        assert server["connections"] == 1


async def test_a_connection_the_server_closed_is_not_reused() -> None:
    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_of(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()  # then closed, with nothing said: keep-alive as far as it knows

    async with serving(once) as server, lean_client(base_url=server["url"]) as http:
        first = await http.get("a")
        await asyncio.sleep(0.1)  # the close reaches the pooled connection
        second = await http.get("b")
        assert (first.text, second.text) == ("ok", "ok")
        assert server["connections"] == 2


async def test_a_silent_server_hits_the_read_timeout() -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_of(reader)
        writer.write(HEAD + chunk(b"data: 0\n\n"))
        await writer.drain()
        await asyncio.sleep(5)

    async with serving(stall) as server, lean_client(base_url=server["url"]) as http:
        seen: list[bytes] = []
        with pytest.raises(httpx.ReadTimeout):
            async with http.stream("GET", "x", timeout=httpx.Timeout(5.0, read=0.3)) as r:
                async for part in r.aiter_bytes():
                    seen.append(part)
        assert seen == [b"data: 0\n\n"]


async def test_a_body_cut_by_the_server_is_an_error_not_an_end() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_of(reader)
        writer.write(HEAD + chunk(b"data: 0\n\n"))
        await writer.drain()

    async with serving(cut) as server, lean_client(base_url=server["url"]) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            async with http.stream("GET", "x") as r:
                async for _ in r.aiter_bytes():
                    pass


async def test_nobody_listening_is_a_connect_error() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    async with lean_client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/")


async def test_a_body_larger_than_the_buffer_arrives_whole(monkeypatch) -> None:
    monkeypatch.setattr(network, "HIGH_WATER", 4096)  # reading pauses and resumes many times
    body = bytes(range(256)) * 1024

    async def big(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_of(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()

    async with serving(big) as server, lean_client(base_url=server["url"]) as http:
        async with http.stream("GET", "x") as r:
            got = b""
            async for part in r.aiter_bytes():
                got += part
                await asyncio.sleep(0)  # a slow reader: the buffer fills
        assert got == body


async def test_https_is_read_through_the_same_sockets(tmp_path: Path) -> None:
    from assistant.web.edge.tls import self_signed

    cert = self_signed(tmp_path, ["127.0.0.1"])
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert.cert, cert.key)
    trust = ssl.create_default_context(cafile=str(cert.cert))
    async with serving(streamed, tls) as server:
        async with lean_client(base_url=server["url"], verify=trust) as http:
            async with http.stream("POST", "v1/chat/completions", json={}) as r:
                body = b"".join([part async for part in r.aiter_bytes()])
    assert body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
