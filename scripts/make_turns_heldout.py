"""Writes a held-out set for `assistant bench turns`: requests spoken by the app's Piper voice,
most cut into two or three parts with a mid-sentence pause (0.4-1.2 s) between them (four
after a word a sentence does not end on: "a flight to | Paris"), some whole short sentences
with none, and a `transcripts.json` naming them.

    .venv/bin/python scripts/make_turns_heldout.py /tmp/turns_heldout
    .venv/bin/python -m assistant.cli bench turns --audio /tmp/turns_heldout

A request is spoken in one go, its parts joined by commas, and the short pause Piper makes
at each of those commas is then stretched to the pause drawn for it: the words before it keep
the pitch of a clause that goes on, as a person pausing mid-sentence sounds. (Each part
spoken on its own, as first tried, is a sentence with a sentence's fall: Smart Turn took
nearly every such pause for an end, 0.95-0.99.) Rates 0.9-1.15 and pauses are drawn from a
fixed seed, so the set is the same each time. The wav files are not committed.
"""

from __future__ import annotations

import json
import random
import sys
import wave
from pathlib import Path

import numpy as np

REQUESTS = [
    ["Can you remind me", "to call my sister", "tomorrow at noon?"],
    ["What's the weather going to be like", "in Lisbon this weekend?"],
    ["Set a timer", "for twenty five minutes."],
    ["I need a recipe for dinner", "something with chicken", "and not too spicy."],
    ["How long does it take", "to drive from Boston to New York?"],
    ["Add milk and eggs", "to my shopping list."],
    ["Could you summarise the email", "that Maria sent me this morning?"],
    ["Play some quiet music", "for reading."],
    ["What was the name of that film", "with the robot", "who cleans up the earth?"],
    ["Turn the living room lights", "down to thirty percent."],
    ["Tell me the difference between a virus", "and a bacterium."],
    ["Book a table for four", "on Friday evening", "somewhere near the station."],
    ["When is my next meeting", "with the design team?"],
    ["Translate good morning", "into Japanese."],
    ["Write a short thank you note", "to my neighbour", "for watering the plants."],
    ["How many grams of sugar", "are in a teaspoon?"],
    ["Explain how compound interest works", "with a simple example."],
    ["Find me a train to Edinburgh", "that leaves after six."],
    # a person looking for the next word: the pause after one a sentence does not end on
    ["I want to book a flight to", "Paris next Tuesday."],
    ["Remind me about the", "dentist appointment on Monday."],
    ["Can you check if", "the package has arrived?"],
    ["What's the capital of", "Australia?"],
]
WHOLE = [
    "What time is it?",
    "Thanks, that's all.",
    "Yes, please.",
    "Stop the music.",
    "How tall is Mount Everest?",
    "Read me the news.",
    "No, the other one.",
    "Good night.",
]
SEED = 51
LEAD_S = 0.3
"""Silence before the first word."""


def _speak(tts, text: str, rate: float) -> tuple[np.ndarray, int]:
    """int16 samples of `text` at `rate`, the voice's leading and trailing silence kept
    (Piper's own, a few tens of ms)."""
    chunks = list(tts.at_rate(rate).synthesize(text))
    rate_hz = chunks[0].sample_rate
    pcm = b"".join(c.samples for c in chunks)
    return np.frombuffer(pcm, dtype="<i2"), rate_hz


def _gaps(samples: np.ndarray, hz: int, k: int) -> list[int]:
    """The middles of the `k` longest quiet stretches between words (10 ms frames under 2%
    of the peak), in order: Piper's pauses at the commas."""
    step = hz // 100
    n = len(samples) // step
    rms = np.sqrt((samples[: n * step].astype(np.float64).reshape(n, step) ** 2).mean(axis=1))
    quiet = rms < 0.02 * rms.max()
    loud = np.flatnonzero(~quiet)
    runs = []  # (length, middle sample) of quiet runs inside the speech
    start = None
    for i in range(int(loud[0]), int(loud[-1]) + 1):
        if quiet[i] and start is None:
            start = i
        elif not quiet[i] and start is not None:
            runs.append((i - start, (start + i) // 2 * step))
            start = None
    return sorted(middle for _, middle in sorted(runs, reverse=True)[:k])


def main(out_dir: str) -> int:
    from assistant.settings import load_settings
    from assistant.speech.tts import load_local_tts

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tts = load_local_tts(load_settings())
    rng = random.Random(SEED)
    index = {}
    items = [(f"split{i:02d}.wav", parts) for i, parts in enumerate(REQUESTS)]
    items += [(f"whole{i:02d}.wav", [text]) for i, text in enumerate(WHOLE)]
    for name, parts in items:
        rate = round(rng.uniform(0.9, 1.15), 2)
        pauses = [round(rng.uniform(0.4, 1.2), 2) for _ in parts[1:]]
        samples, hz = _speak(tts, ", ".join(parts), rate)
        cuts = _gaps(samples, hz, len(pauses))
        audio = [np.zeros(int(LEAD_S * hz), dtype="<i2")]
        at = 0
        for cut, pause in zip(cuts, pauses, strict=True):
            audio += [samples[at:cut], np.zeros(int(pause * hz), dtype="<i2")]
            at = cut
        audio.append(samples[at:])
        with wave.open(str(out / name), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(hz)
            w.writeframes(np.concatenate(audio).tobytes())
        index[name] = {
            "text": " ".join(parts),
            "language": "en",
            "added_pause_s": pauses,  # on top of Piper's own pause at the comma
            "rate": rate,
            "source": "the app's Piper voice, scripts/make_turns_heldout.py",
        }
    (out / "transcripts.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"{len(index)} recordings in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/turns_heldout"))
