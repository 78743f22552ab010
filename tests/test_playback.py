"""What of a spoken reply the person heard (`call.playback`): cut on the reply's own words by
the audio each sentence took, each spoken sentence mapped back onto the text it was made from
(by the real sentence splitter and speech normalisation), and the page's playback report read
safely."""

from __future__ import annotations

import itertools

import pytest

from assistant.call.playback import Played, heard_part, source_spans
from assistant.records import HANDED_OFF
from assistant.speech.sentences import SentenceSplitter
from assistant.speech.tts import clean_for_speech, speech_sentences

REPLY = "Sure! The **first** step is easy.  Then, the second one takes longer. And a third."
SPOKEN = [
    ("Sure!", 400.0),
    ("The first step is easy.", 1000.0),
    ("Then, the second one takes longer.", 1200.0),
]


@pytest.mark.parametrize(
    ("played", "heard"),
    [
        (0.0, ""),
        (399.0, ""),
        (400.0, "Sure!"),
        (900.0, "Sure! The **first**"),  # half of five words: two of them
        (1400.0, "Sure! The **first** step is easy."),
        (2000.0, "Sure! The **first** step is easy.  Then, the second"),  # half of six
        (2600.0, "Sure! The **first** step is easy.  Then, the second one takes longer."),
        (99_000.0, "Sure! The **first** step is easy.  Then, the second one takes longer."),
    ],
)
def test_the_reply_is_cut_to_the_words_whose_audio_had_played(played, heard):
    # the reply's own text and spacing are kept; the unspoken last sentence never counts
    assert heard_part(REPLY, SPOKEN, played) == heard


def test_markup_that_is_not_said_does_not_shift_the_cut():
    reply = "- **Paris** is the capital.\n- Lyon is second."
    spoken = [("Paris is the capital.", 1000.0), ("Lyon is second.", 600.0)]
    assert heard_part(reply, spoken, 1000.0) == "- **Paris** is the capital."
    assert heard_part(reply, spoken, 1300.0) == "- **Paris** is the capital.\n- Lyon"


def test_everything_spoken_and_played_is_the_whole_reply():
    assert heard_part("One. Two.", [("One.", 300.0), ("Two.", 300.0)], 600.0) == "One. Two."
    assert heard_part("One. Two.", [], 5000.0) == ""  # nothing was sent to be played


# Said otherwise than written: `max_retries` ("max retries"), a URL ("a link"), a Markdown
# link (its text), list numbers and emphasis (not said), a number ("2,000"), and code (never).
WRITTEN = (
    "Set `max_retries` in **config.toml**, as shown at https://example.com/docs/retries. "
    "Then restart:\n\n```bash\nsystemctl restart app\n```\n\n"
    "1. Check the log.\n2. Wait about 2,000 ms.\n\nSee [the guide](https://example.com/g) for more."
)
SOURCES = [  # what each spoken sentence was made from, in order
    "Set `max_retries` in **config.toml**, as shown at https://example.com/docs/retries.",
    "Then restart:",
    "1. Check the log.",
    "2. Wait about 2,000 ms.",
    "See [the guide](https://example.com/g) for more.",
]


def _spoken(reply: str, step: int = 7) -> list[tuple[str, float]]:
    """What the voice says of `reply` streamed in `step`-character deltas, as the call keeps it:
    the splitter's sentences, each as the voice speaks it (`speech_sentences`, what Piper and a
    speech server are given), 100 ms a word."""
    splitter = SentenceSplitter()
    deltas = [reply[i : i + step] for i in range(0, len(reply), step)]
    sentences = [s for d in deltas for s in splitter.feed(d)] + splitter.flush()
    said = [c for s in sentences for c in speech_sentences(s)]
    return [(c, 100.0 * len(c.split())) for c in said]


def test_each_spoken_sentence_maps_back_onto_the_text_it_was_made_from():
    spoken = _spoken(WRITTEN)
    assert [t for t, _ in spoken][:2] == ["Set max retries in config.toml, as shown at a link.",
                                           "Then restart:"]  # fmt: skip
    spans = source_spans(WRITTEN, [t for t, _ in spoken])
    assert [WRITTEN[a:b] for a, b in spans] == SOURCES
    for (said, _), (a, b) in zip(spoken, spans, strict=True):
        assert clean_for_speech(WRITTEN[a:b]) == said


def test_a_reply_stopped_after_a_sentence_keeps_that_sentence_word_for_word():
    # issue 48 item 4: counting the spoken words against the written ones kept "Then
    # restart:" too, never played ("max retries" and "a link" are two words said, one written)
    spoken = _spoken(WRITTEN)
    ends = list(itertools.accumulate(ms for _, ms in spoken))
    kept = [heard_part(WRITTEN, spoken, end) for end in ends]
    assert kept[0] == SOURCES[0]
    assert kept[1] == SOURCES[0] + " Then restart:"  # the code that follows was never said
    for heard, source in zip(kept[2:], SOURCES[2:], strict=True):
        assert heard.endswith(source) and WRITTEN.startswith(heard)
    assert kept[-1] == WRITTEN


@pytest.mark.parametrize(
    ("sentence", "share", "heard"),
    [
        (0, 0.5, "Set `max_retries` in **config.toml**,"),  # 5 of the 11 words said
        (0, 0.99, SOURCES[0]),
        (1, 0.5, SOURCES[0] + " Then"),
        (2, 0.4, "1. Check"),  # not "1.": the list number is not said
        (3, 0.5, "2. Wait about"),
    ],
)
def test_a_sentence_stopped_partway_is_cut_at_its_share_of_words_within_its_source(
    sentence, share, heard
):
    spoken = _spoken(WRITTEN)
    before = sum(ms for _, ms in spoken[:sentence])
    kept = heard_part(WRITTEN, spoken, before + share * spoken[sentence][1])
    assert kept.endswith(heard) and WRITTEN.startswith(kept)
    assert len(kept) <= WRITTEN.index(SOURCES[sentence]) + len(SOURCES[sentence])


@pytest.mark.parametrize("step", [1, 3, 40, 10_000])
def test_the_cut_only_ever_shortens_the_reply_and_never_goes_back(step):
    reply = WRITTEN + "\n\n- Use `a_b_c` at https://x.io/y, then **stop**. Done!"
    spoken = _spoken(reply, step)
    total = sum(ms for _, ms in spoken)
    kept = [heard_part(reply, spoken, ms) for ms in range(0, int(total) + 200, 50)]
    assert all(reply.startswith(k) for k in kept)
    assert all(len(a) <= len(b) for a, b in itertools.pairwise(kept))
    assert kept[0] == "" and kept[-1] == reply


def test_what_was_said_but_not_written_adds_nothing():
    # the hand-off is said in other words than written; a piece of a link speech cut in two
    assert heard_part("Sure.", [("Sure.", 100.0), (HANDED_OFF, 900.0)], 500.0) == "Sure."
    assert heard_part("", [(HANDED_OFF, 900.0)], 500.0) == ""
    reply = "Open https://a.io/b?c=d. Then wait."
    spoken = _spoken(reply)
    assert [t for t, _ in spoken] == ["Open a link?", "c=d.", "Then wait."]
    assert heard_part(reply, spoken, sum(ms for _, ms in spoken[:2])) == "Open https://a.io/b?c=d."
    assert heard_part(reply, spoken, 10_000.0) == reply


@pytest.mark.parametrize(
    ("message", "parsed"),
    [
        ({"played": 3, "ms": 1250.5, "interrupted": True}, Played(3, 1250.5, True)),
        ({"played": -2, "ms": 0}, Played(-2, 0.0, False)),  # a typed turn's reply; not cut
        ({"played": "3", "ms": 10}, None),
        ({"played": True, "ms": 10}, None),
        ({"played": 3, "ms": -1}, None),
        ({"played": 3, "ms": float("nan")}, None),
        ({"played": 3, "ms": 1e12}, None),
        ({"played": 3}, None),
    ],
)
def test_the_pages_report_is_read_or_ignored_never_trusted_blindly(message, parsed):
    assert Played.parse(message) == parsed
