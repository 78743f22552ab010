"""The incremental sentence splitter: complete sentences as early as safe, never too early."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from assistant.speech.sentences import (
    MAX_CLAUSE_CHARS,
    SentenceSplitter,
    split_sentences,
    strip_code_blocks,
)


def stream(text: str, step: int) -> tuple[list[str], list[str]]:
    """Feed `text` in `step`-sized deltas; return (sentences from feed, from flush)."""
    splitter = SentenceSplitter()
    fed: list[str] = []
    for i in range(0, len(text), step):
        fed += splitter.feed(text[i : i + step])
    return fed, splitter.flush()


@pytest.mark.parametrize("step", [1, 2, 5, 17, 1000])
def test_same_sentences_whatever_the_delta_size(step: int) -> None:
    text = "Hello there. How are you today? I am fine! Thanks for asking."
    fed, rest = stream(text, step)
    assert [*fed, *rest] == [
        "Hello there.",
        "How are you today?",
        "I am fine!",
        "Thanks for asking.",
    ]
    # The last sentence has nothing after it, so only flush can know it is complete.
    assert rest == ["Thanks for asking."]


def test_a_sentence_is_released_once_the_next_has_begun() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("The answer is four.") == []
    assert splitter.feed(" ") == []
    assert splitter.feed("It is ") == ["The answer is four."]
    assert splitter.flush() == ["It is"]


@pytest.mark.parametrize(
    "text",
    [
        "Use a fast model, e.g. the tiny one, for speech.",
        "Dr. Smith will see you now.",
        "Pi is roughly 3.14 and that is enough.",
        "She moved to the U.S. Army base last year.",
        "Mr. and Mrs. Jones arrived at 5 p.m. sharp.",
        "Version 1.2.3 fixed it, i.e. the crash is gone.",
    ],
)
def test_abbreviations_and_numbers_do_not_split(text: str) -> None:
    for step in (1, 3, len(text)):
        fed, rest = stream(text, step)
        assert [*fed, *rest] == [text]


def test_abbreviation_at_a_real_sentence_end_still_splits() -> None:
    fed, rest = stream("I live in the U.S. It is big.", 1)
    assert [*fed, *rest] == ["I live in the U.S.", "It is big."]


def test_terminators_ellipsis_quotes_and_paragraphs() -> None:
    text = 'Wait… What happened? He said "Stop." Then he left.\n\nNew paragraph here'
    fed, rest = stream(text, 3)
    assert [*fed, *rest] == [
        "Wait…",
        "What happened?",
        'He said "Stop."',
        "Then he left.",
        "New paragraph here",
    ]


def test_ellipsis_before_lowercase_is_one_thought() -> None:
    assert split_sentences("Well… maybe not today. Sure.") == ["Well… maybe not today.", "Sure."]


def test_long_clause_is_cut_early_at_a_comma() -> None:
    clause = ", ".join(f"item number {i} in a list that never ends" for i in range(20))
    splitter = SentenceSplitter()
    first: list[str] = []
    i = 0
    while not first:
        first = splitter.feed(clause[i])
        i += 1
    # Speech can start long before the clause ends, and the cut falls after a comma.
    assert i <= MAX_CLAUSE_CHARS + 2
    assert first[0].endswith(",") and len(first[0]) <= MAX_CLAUSE_CHARS
    pieces = first + splitter.feed(clause[i:]) + splitter.flush()
    assert len(pieces) >= 4
    assert all(len(p) <= MAX_CLAUSE_CHARS for p in pieces)
    assert " ".join(pieces) == clause


def test_one_enormous_token_is_hard_cut() -> None:
    token = "x" * 1000
    pieces = split_sentences(token)
    assert "".join(pieces) == token
    assert max(len(p) for p in pieces) <= MAX_CLAUSE_CHARS


def test_code_blocks_are_never_spoken() -> None:
    text = (
        "Run this:\n```python\nprint('Hello. World.')\nx = 1. \n```\nThat prints a greeting. Done."
    )
    for step in (1, 2, 4, len(text)):
        fed, rest = stream(text, step)
        spoken = [*fed, *rest]
        assert spoken == ["Run this:", "That prints a greeting.", "Done."], step
        assert not any("print(" in s or "```" in s for s in spoken)


def test_unclosed_code_block_drops_the_rest() -> None:
    fed, rest = stream("Here it is.\n```bash\nrm -rf build. echo done.", 3)
    assert [*fed, *rest] == ["Here it is."]


def test_strip_code_blocks_keeps_prose_and_inline_code() -> None:
    assert strip_code_blocks("a ```x``` b `c` d") == "a  b `c` d"


def test_symbol_only_pieces_are_not_sentences() -> None:
    assert split_sentences("---\n\n***\n\n") == []
    assert split_sentences("") == []
    fed, rest = stream("   \n  ", 1)
    assert fed == [] and rest == []


def test_flush_resets_for_the_next_reply() -> None:
    splitter = SentenceSplitter()
    splitter.feed("```\ncode")
    assert splitter.flush() == []
    assert splitter.feed("Fresh start. Next ") == ["Fresh start."]


def test_feeding_a_long_reply_does_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The splitter asks pysbd (the slow part) about each new boundary once, on the text not
    yet returned, never the whole reply again at every delta: the work is counted, not timed
    (a timed bound fails on a busy machine and passes a quadratic splitter on a fast one)."""
    import assistant.speech.sentences as sentences

    seen: list[int] = []
    real = sentences._pysbd_bounds

    def counted(text: str) -> list[int]:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(sentences, "_pysbd_bounds", counted)
    text = "This is a sentence with e.g. an abbreviation and 3.5 numbers. " * 100
    fed, rest = stream(text, 4)  # ~1,500 deltas, as a token stream would arrive
    assert len(fed) + len(rest) == 100
    # about two looks per sentence, each at a sentence or two of text
    assert len(seen) <= 3 * 100, len(seen)
    assert sum(seen) <= 3 * len(text), sum(seen)


def test_a_long_first_sentence_is_spoken_from_its_first_clause():
    from assistant.speech.sentences import SentenceSplitter

    s = SentenceSplitter()
    reply = (
        "The steam engine works by heating water in a boiler until it boils, and the "
        "steam pushes a piston back and forth inside a cylinder. Then a crank turns."
    )
    pieces = []
    for word in reply.split(" "):
        pieces += s.feed(word + " ")
    pieces += s.flush()
    assert pieces[0] == "The steam engine works by heating water in a boiler until it boils,"
    assert pieces[1].startswith("and the steam pushes") and pieces[1].endswith("cylinder.")
    assert pieces[2] == "Then a crank turns."


def test_short_replies_stay_whole_sentences():
    from assistant.speech.sentences import SentenceSplitter

    s = SentenceSplitter()
    pieces = []
    for word in "Yes, it is. Paris, the capital, is in France, in Europe. Sure.".split(" "):
        pieces += s.feed(word + " ")
    pieces += s.flush()
    assert pieces == ["Yes, it is.", "Paris, the capital, is in France, in Europe.", "Sure."]


def tokens(text: str) -> list[str]:
    """`text` as a model streams it: token-sized deltas, each a space and a few characters."""
    return re.findall(r"\s*\S{1,4}", text)


def first_piece(reply: str) -> tuple[str, int]:
    """The first piece spoken of `reply` streamed as tokens, and how much had arrived then."""
    splitter, arrived = SentenceSplitter(), 0
    for delta in tokens(reply):
        arrived += len(delta)
        if out := splitter.feed(delta):
            return out[0], arrived
    return splitter.flush()[0], len(reply)


@pytest.mark.parametrize(
    ("reply", "first"),
    [
        (
            "The short answer is yes, but only if the warranty is still valid for your model.",
            "The short answer is yes,",
        ),
        (
            "A heat pump moves heat from outside to inside because compressing a gas makes it "
            "hotter, and letting it expand again makes it colder.",
            "A heat pump moves heat from outside to inside",
        ),
        (
            "Restart the service from the settings page and it will pick up the new configuration "
            "without a reboot.",
            "Restart the service from the settings page",
        ),
        (
            "It depends on your budget — a used bike costs far less than a new one does.",
            "It depends on your budget —",
        ),
        (
            "There are two good options here: take the bus from the station or walk along the "
            "river path.",
            "There are two good options here:",
        ),
        (
            "I moved to the U.S., so it was a big change for the whole family at first.",
            "I moved to the U.S.,",
        ),
    ],
)
def test_the_first_piece_is_a_natural_clause_spoken_before_the_sentence_ends(
    reply: str, first: str
) -> None:
    # issue 51: speech starts on the first few words, where a speaker would pause, not at
    # the first sentence's end (nor, as before, only past 60 characters)
    piece, arrived = first_piece(reply)
    assert piece == first
    assert len(reply[arrived:].split()) >= 4  # long before the sentence end arrived
    fed, rest = stream(reply, 3)
    assert [*fed, *rest] == [first, reply[len(first) :].strip()]
    # the whole sentence at once (a Wyoming chunk, a reply that was not streamed): its end is
    # there, so it is kept whole
    assert split_sentences(reply) == [reply]


@pytest.mark.parametrize(
    "reply",
    [
        "It costs 1,000 dollars and takes about three weeks to arrive by sea freight.",  # number
        "Use a fast model, e.g. the tiny one, for speech and for nothing else at all.",  # e.g.
        'He said "turn left, then right, and keep going until the bridge" and then left.',
        "You will need flour, sugar, eggs, butter and a pinch of salt for this recipe.",  # list
        "The flag has stripes of red, green and dark blue from the top to the bottom.",
        "Paris, the capital, is a big city in the north of France with many museums.",
        "The answer is four, I think.",  # only a fragment after the comma
        "The train leaves at noon, so be early.",  # the sentence ends soon after: whole
        "Well, you could try the bus instead of walking all the way over there.",  # "Well,"
        "The valve sits between the engine and the boiler in most of the older cars.",
        "It was so good that we went back to the same place the next day for more.",
    ],
)
def test_what_must_not_be_cut_stays_one_sentence(reply: str) -> None:
    for deltas in (tokens(reply), list(reply), [reply]):
        splitter = SentenceSplitter()
        fed = [s for d in deltas for s in splitter.feed(d)]
        assert [*fed, *splitter.flush()] == [reply]


def test_only_the_first_piece_is_a_clause() -> None:
    # once speech plays, whole sentences sound better: a later sentence is never cut
    reply = (
        "Sure. The steam engine works by heating water in a boiler, and the steam pushes a "
        "piston. The short answer is yes, but only if the warranty is still valid."
    )
    splitter = SentenceSplitter()
    fed = [s for d in tokens(reply) for s in splitter.feed(d)]
    assert [*fed, *splitter.flush()] == [
        "Sure.",
        "The steam engine works by heating water in a boiler, and the steam pushes a piston.",
        "The short answer is yes, but only if the warranty is still valid.",
    ]


def test_looking_for_the_first_clause_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A first sentence fed at once and never ending (a list of 20,000 items) is looked at
    for its first clause within the first few hundred characters only, not all of it at
    every candidate cut: the work is counted, as above, not timed."""
    import assistant.speech.sentences as sentences

    seen: list[int] = []

    class Counted:
        def finditer(self, text: str) -> Iterator[re.Match[str]]:
            seen.append(len(text))
            return re.finditer(r"\S+", text)

    monkeypatch.setattr(sentences, "_WORD", Counted())
    pieces = split_sentences("item, " * 20_000)
    assert len(pieces) > 100 and seen and max(seen) <= 2 * MAX_CLAUSE_CHARS
