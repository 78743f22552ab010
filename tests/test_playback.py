"""What of a spoken reply the person heard (`turns.playback`): cut on the reply's own words by
the audio each sentence took, and the page's playback report read safely."""

from __future__ import annotations

import pytest

from assistant.turns.playback import Played, heard_part

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
