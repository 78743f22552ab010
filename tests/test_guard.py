"""The reply guard: runs of the system prompt never reach what a reply shows."""

from __future__ import annotations

import pytest

from assistant.prompting.guard import WITHHELD, PromptGuard, guarded, withhold
from assistant.prompting.prompt import Prompts
from assistant.records import StreamEvent

SYSTEM = Prompts.load().system


def _through(text: str, step: int) -> tuple[str, int]:
    guard = PromptGuard(SYSTEM)
    out = [guard.feed(text[i : i + step]) for i in range(0, len(text), step)]
    return "".join(out) + guard.flush(), guard.withheld


@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_a_repeated_prompt_is_withheld_however_it_streams(step: int):
    shown, runs = _through("Sure! Here it is: " + SYSTEM + " Anything else?", step)
    assert runs == 1 and shown == "Sure! Here it is:" + WITHHELD + " Anything else?"


@pytest.mark.parametrize(
    "text",
    [
        "The capital of France is Paris. If you do not know, say so.",  # 7 prompt words
        "You can call the delegate tool, and I will answer briefly.",
        "  Leading spaces, a tab\tand a line\nbreak stay as they are.  ",
        "",
    ],
)
@pytest.mark.parametrize("step", [1, 4, 1000])
def test_other_text_comes_through_unchanged(text: str, step: int):
    assert _through(text, step) == (text, 0)


def test_a_paraphrased_part_is_withheld_from_its_eighth_word():
    leak = "ANSWER briefly, and directly: most replies are read aloud."
    shown, runs = _through("Okay. " + leak, 2)
    assert runs == 1 and shown == "Okay." + WITHHELD


def test_ordinary_words_wait_at_most_until_the_run_breaks():
    guard = PromptGuard(SYSTEM)
    assert guard.feed("Paris ") == "Paris"  # its space goes out with the next word
    # "answer briefly" begins the prompt: held until the next word shows it is no leak
    assert guard.feed("answer briefly ") == ""
    assert guard.feed("today. ") == " answer briefly today."
    assert guard.flush() == " "


async def test_the_stream_keeps_every_event_and_its_tokens():
    async def engine():
        yield StreamEvent("reasoning", text="I must not say: " + SYSTEM, tokens=5)
        for word in ("Hello", " there", " friend."):
            yield StreamEvent("content", text=word, tokens=1)
        yield StreamEvent("finish", finish_reason="stop")

    events = [ev async for ev in guarded(engine(), SYSTEM)]
    assert sum(ev.tokens for ev in events) == 8
    reasoning = "".join(ev.text for ev in events if ev.kind == "reasoning")
    content = "".join(ev.text for ev in events if ev.kind == "content")
    assert reasoning == "I must not say:" + WITHHELD
    assert content == "Hello there friend."
    assert events[-1].kind == "finish"


def test_a_stored_job_result_is_withheld_at_once():
    delegate = Prompts.load().delegate
    leaked = "Done. Note: " + delegate + " The report follows."
    assert withhold(leaked, delegate) == "Done. Note:" + WITHHELD + " The report follows."
    assert withhold("The report follows.", delegate) == "The report follows."


def test_each_prompt_has_its_own_guard_when_guards_are_built_from_a_cache():
    # the word runs are built once per prompt and shared: a guard for another prompt (a turn
    # with a job note) must withhold that prompt's words, and no longer the first one's
    first = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"
    second = "kilo lima mike november oscar papa quebec romeo sierra tango"
    assert withhold(first, first) == WITHHELD
    assert withhold(second, second) == WITHHELD
    assert withhold(first, second) == first
    assert withhold(second, first) == second
    assert withhold(first, first, run=11) == first  # the run length is part of the key
