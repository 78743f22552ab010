"""The engine's lean SSE reader (`engine.sse`): chunks as the SDK's models read, errors as the
SDK's stream raises them, and the request still shaped and checked by the official client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from assistant.engine.sse import Chunk, LeanClient, LeanStream, parse

REQUEST = httpx.Request("POST", "http://engine/v1/chat/completions")


class Broken(httpx.AsyncByteStream):
    def __init__(self, first: bytes, error: Exception):
        self.first, self.error = first, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise self.error


def response(body: bytes | httpx.AsyncByteStream) -> httpx.Response:
    stream = body if isinstance(body, httpx.AsyncByteStream) else httpx.ByteStream(body)
    return httpx.Response(200, stream=stream, request=REQUEST)  # type: ignore[arg-type]


async def chunks(body: bytes | httpx.AsyncByteStream) -> list[Chunk]:
    return [c async for c in LeanStream(response(body))]


def test_a_chunk_reads_like_the_sdks_model() -> None:
    c = parse('{"choices": [{"delta": {"content": "hi", "reasoning": "hm"}, "index": 0}]}')
    delta = c.choices[0].delta
    assert delta.content == "hi" and delta.reasoning == "hm"
    assert delta.tool_calls is None and delta.model_extra is None and c.usage is None


async def test_events_end_at_done_and_skip_comments_and_names() -> None:
    body = (
        b': keep-alive\n\nevent: message\ndata: {"a": 1}\n\n'
        b'data: {"a":\ndata: 2}\n\n'  # one event over two data lines
        b'data: [DONE]\n\ndata: {"a": 3}\n\n'
    )
    assert [c.a for c in await chunks(body)] == [1, 2]
    assert [c.a for c in await chunks(b'data: {"a": 1}')] == [1]  # no blank line at the end


async def test_an_error_event_raises_like_the_sdk() -> None:
    body = b'data: {"a": 1}\n\ndata: {"error": {"message": "engine overloaded"}}\n\n'
    with pytest.raises(openai.APIError, match="engine overloaded"):
        await chunks(body)


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (httpx.ReadTimeout("slow"), openai.APITimeoutError),
        (httpx.RemoteProtocolError("peer closed"), openai.APIConnectionError),
    ],
)
async def test_a_broken_connection_raises_the_sdks_errors(error: Exception, raised: type) -> None:
    with pytest.raises(raised):
        await chunks(Broken(b'data: {"a": 1}\n\n', error))


async def test_the_request_is_the_clients_own() -> None:
    seen: list[httpx.Request] = []

    def engine(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if json.loads(request.content)["messages"][0]["content"] == "busy":
            return httpx.Response(429, json={"error": {"message": "busy"}},
                                  headers={"retry-after": "1"})  # fmt: skip
        return httpx.Response(200, text='data: {"choices": []}\n\ndata: [DONE]\n\n')

    http = httpx.AsyncClient(transport=httpx.MockTransport(engine))
    sdk = AsyncOpenAI(base_url="http://engine/v1", api_key="k", max_retries=0, http_client=http)
    client = LeanClient(sdk).with_options(timeout=5)
    stream = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        max_tokens=7,
        extra_body={"priority": 10},
    )
    assert [c.choices async for c in stream] == [[]]
    await stream.close()
    sent = json.loads(seen[0].content)
    assert seen[0].url.path == "/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer k"
    assert sent["stream"] is True and sent["max_tokens"] == 7 and sent["priority"] == 10
    assert "extra_body" not in sent
    with pytest.raises(openai.RateLimitError):  # a status error, as the SDK raises it
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "busy"}], stream=True
        )


def sse(*objects: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objects)


def delta(**fields: object) -> dict:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}], "usage": None}


class Reads(httpx.AsyncByteStream):
    """A body that arrives in the given reads of the socket."""

    def __init__(self, *reads: bytes):
        self.reads = reads

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for r in self.reads:
            yield r


async def test_pieces_of_text_read_at_once_go_up_as_one_chunk_counting_them() -> None:
    # every chunk costs the same CPU through each layer above whatever its length; under load
    # the engine's tokens arrive several to a read (issue 52)
    first = sse(delta(role="assistant", content=""), delta(content="Hel"), delta(content="lo"))
    second = sse(
        delta(reasoning_content="hm"),  # another field: not joined to the content
        delta(content=" there"), delta(content="!", tool_calls=[]),  # an empty list is absent
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": None},
        {"choices": [], "usage": {"completion_tokens": 6}},
    )  # fmt: skip
    got = await chunks(Reads(first, second + b"data: [DONE]\n\n"))
    seen = [(c.choices[0].delta if c.choices else None, c.get("x_merged")) for c in got]
    assert seen == [
        ({"role": "assistant", "content": ""}, None),  # the role's chunk stays its own
        ({"content": "Hello"}, 2),
        ({"reasoning_content": "hm"}, None),
        ({"content": " there!"}, 2),
        ({}, None),  # the finish
        (None, None),  # the usage
    ]


async def test_text_from_separate_reads_is_not_held_back_to_join_it() -> None:
    got = await chunks(Reads(sse(delta(content="a")), sse(delta(content="b"))))
    assert [c.choices[0].delta.content for c in got] == ["a", "b"]


async def test_an_error_after_pieces_in_the_same_read_raises_after_them() -> None:
    seen: list[Chunk] = []
    body = sse(delta(content="a"), delta(content="b"), {"error": {"message": "engine died"}})
    with pytest.raises(openai.APIError, match="engine died"):
        async for c in LeanStream(response(body)):
            seen.append(c)
    assert [c.choices[0].delta.content for c in seen] == ["ab"]
