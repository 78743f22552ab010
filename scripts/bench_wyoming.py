"""A satellite's wait over Wyoming: from the end of its audio (`audio-stop`) to the first
audio back (the first `audio-chunk` of the spoken answer), for a chat question, against a
running `assistant serve --wyoming` (docs/home-assistant.md has the figures).

    .venv/bin/python scripts/bench_wyoming.py --port 10700 -n 9

Only the `wyoming` library's client is used, as Home Assistant uses it, so it measures any
Wyoming server that offers asr, handle and tts. Each round: the question's audio is streamed
in real time (16 kHz 16-bit mono, 1024-byte chunks, as a satellite sends it through Home
Assistant), `audio-stop`, the `transcript`; then the conversation and the speech, two ways:

- `sequential`: as Home Assistant 2025.4 does it: `transcript` to handle, read until
  `handled`, then `synthesize` with the whole answer;
- `streaming`: the answer's `handled-chunk`s go to tts as `synthesize-chunk`s as they come
  (`synthesize-start` at the first), so the first sentence is spoken while the rest is written.

The questions (`--question`, again for more; default: the capitals of ten countries, so no
answer is a cache's) are said in the server's own voice (asked once each over tts); the first
warms up, not counted, and the rounds go through the others in turn. The whole run ends
within `--deadline` seconds (default 540).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioChunkConverter, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.handle import Handled, HandledChunk, NotHandled
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

RATE, WIDTH, CHANNELS, CHUNK = 16000, 2, 1, 1024
COUNTRIES = ["France", "Spain", "Italy", "Germany", "Japan", "Canada", "Egypt", "Peru", "Norway",
             "Kenya"]  # fmt: skip
READ_S = 120.0


def client(host: str, port: int) -> AsyncTcpClient:
    return AsyncTcpClient(host, port, connect_timeout=5, read_timeout=READ_S)


async def read(c: AsyncTcpClient) -> object:
    event = await c.read_event()
    if event is None:
        raise RuntimeError("the server closed the connection")
    if event.type == "error":
        raise RuntimeError(f"error event: {event.data}")
    return event


async def question_audio(host: str, port: int, text: str) -> bytes:
    """`text` in the server's voice, as 16 kHz 16-bit mono PCM."""
    convert = AudioChunkConverter(rate=RATE, width=WIDTH, channels=CHANNELS)
    pcm = b""
    async with client(host, port) as c:
        await c.write_event(Synthesize(text=text).event())
        while True:
            event = await read(c)
            if AudioChunk.is_type(event.type):
                pcm += convert.convert(AudioChunk.from_event(event)).audio
            elif AudioStop.is_type(event.type):
                return pcm


async def hear(host: str, port: int, pcm: bytes) -> tuple[str, float, float]:
    """stt.py's exchange, the audio in real time: (the transcript, when `audio-stop` was
    sent, when the transcript came) on the monotonic clock."""
    fmt = {"rate": RATE, "width": WIDTH, "channels": CHANNELS}
    step = CHUNK / (RATE * WIDTH * CHANNELS)
    async with client(host, port) as c:
        await c.write_event(Transcribe(language="en").event())
        await c.write_event(AudioStart(**fmt).event())
        start = time.monotonic()
        for n, i in enumerate(range(0, len(pcm), CHUNK)):
            await c.write_event(AudioChunk(audio=pcm[i : i + CHUNK], **fmt).event())
            await asyncio.sleep(max(0.0, start + (n + 1) * step - time.monotonic()))
        await c.write_event(AudioStop().event())
        stopped = time.monotonic()
        while True:
            event = await read(c)
            if Transcript.is_type(event.type):
                return Transcript.from_event(event).text, stopped, time.monotonic()


async def first_audio(c: AsyncTcpClient) -> float:
    while True:
        event = await read(c)
        if AudioChunk.is_type(event.type):
            return time.monotonic()
        if AudioStop.is_type(event.type):
            raise RuntimeError("the answer was spoken without audio")


async def answer_sequential(
    host: str, port: int, text: str, context: dict
) -> tuple[str, float, float]:
    """conversation.py, then tts.py: (the answer, when `handled` came, the first audio)."""
    async with client(host, port) as c:
        await c.write_event(Transcript(text=text, context=context).event())
        while True:
            event = await read(c)
            if NotHandled.is_type(event.type):
                raise RuntimeError(f"not handled: {NotHandled.from_event(event).text}")
            if Handled.is_type(event.type):
                answer, handled = Handled.from_event(event).text or "", time.monotonic()
                break
    async with client(host, port) as tts:
        await tts.write_event(Synthesize(text=answer).event())
        return answer, handled, await first_audio(tts)


async def answer_streaming(
    host: str, port: int, text: str, context: dict
) -> tuple[str, float, float]:
    """The answer's chunks spoken as they are written: (the answer, `handled`, first audio)."""
    async with client(host, port) as c, client(host, port) as tts:
        await c.write_event(Transcript(text=text, context=context).event())
        heard = asyncio.create_task(first_audio(tts))
        started = False
        while True:
            event = await read(c)
            if NotHandled.is_type(event.type):
                raise RuntimeError(f"not handled: {NotHandled.from_event(event).text}")
            if HandledChunk.is_type(event.type):
                if not started:
                    await tts.write_event(SynthesizeStart().event())
                    started = True
                await tts.write_event(
                    SynthesizeChunk(text=HandledChunk.from_event(event).text).event()
                )
            elif Handled.is_type(event.type):
                answer, handled = Handled.from_event(event).text or "", time.monotonic()
                if not started:
                    await tts.write_event(SynthesizeStart().event())
                    await tts.write_event(SynthesizeChunk(text=answer).event())
                await tts.write_event(Synthesize(text=answer).event())
                await tts.write_event(SynthesizeStop().event())
                return answer, handled, await heard


async def one_round(host: str, port: int, pcm: bytes, streaming: bool) -> dict:
    # a new Home Assistant conversation each time, on a satellite of its own: every question
    # is the first of its conversation, as a satellite's wake word begins one
    context = {"conversation_id": uuid.uuid4().hex, "satellite_id": f"bench-{uuid.uuid4().hex}"}
    text, stopped, transcribed = await hear(host, port, pcm)
    answer_with = answer_streaming if streaming else answer_sequential
    answer, handled, audio = await answer_with(host, port, text, context)
    ms = lambda t: round((t - stopped) * 1000, 1)  # noqa: E731
    return {"transcript": text, "answer": answer, "transcript_ms": ms(transcribed),
            "handled_ms": ms(handled), "first_audio_ms": ms(audio)}  # fmt: skip


def summary(values: list[float]) -> dict:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"n": len(values), "median": round(statistics.median(values), 1), "p90": p90,
            "min": ordered[0], "max": ordered[-1], "each": values}  # fmt: skip


async def bench(args: argparse.Namespace) -> dict:
    questions = args.question or [f"What is the capital of {c}?" for c in COUNTRIES]
    pcms = [await question_audio(args.host, args.port, q) for q in questions]
    await one_round(args.host, args.port, pcms[0], streaming=False)  # warm-up, not counted
    rest = pcms[1:] or pcms
    rounds: dict[str, list[dict]] = {"sequential": [], "streaming": []}
    for i in range(args.n):
        for mode in rounds:
            pcm = rest[i % len(rest)]
            rounds[mode].append(await one_round(args.host, args.port, pcm, mode == "streaming"))
    return {
        "bench": "wyoming",
        "server": f"{args.host}:{args.port}",
        "questions": questions,
        "question_audio_s": [round(len(pcm) / (RATE * WIDTH), 2) for pcm in pcms],
        "transcripts": sorted({r["transcript"] for rs in rounds.values() for r in rs}),
        "answers": sorted({r["answer"] for rs in rounds.values() for r in rs})[:10],
        **{
            mode: {
                key: summary([r[key] for r in rs])
                for key in ("transcript_ms", "handled_ms", "first_audio_ms")
            }
            for mode, rs in rounds.items()
        },
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=10700)
    p.add_argument("-n", type=int, default=9, help="rounds of each way (default 9)")
    p.add_argument("--question", action="append", help="a chat question (default: ten)")
    p.add_argument("--deadline", type=float, default=540.0, help="seconds the run may take")
    args = p.parse_args()
    try:
        result = asyncio.run(asyncio.wait_for(bench(args), args.deadline))
    except (OSError, RuntimeError, TimeoutError) as e:
        print(f"error: {e or 'over the deadline'}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
