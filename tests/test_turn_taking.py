"""The call's turn-taking table, a test per row: in this state, this event -> these actions, in
this order, and the call in this phase after them. Pure: no loop, no clock, no sleeps."""

from __future__ import annotations

import itertools

import pytest

from assistant.call.messages import shown
from assistant.call.turn_taking import (
    KEEP,
    SETTLE,
    TABLE,
    Action,
    CallState,
    Event,
    Phase,
    TurnView,
    backchannel,
    busy,
    decide,
    quiet,
    relation,
    resolve,
    settled,
)

A, P = Action, Phase
PREPARED = TurnView(3, "what time is it", committed=False)
"""A reply prepared on utterance 3's candidate end, held."""
REPLYING = TurnView(2, "tell me a story", committed=True, audible=True)
"""Utterance 2's reply, being spoken."""
THINKING = TurnView(2, "tell me a story", committed=True, audible=False)
TYPED = TurnView(-1, "and in Paris?", committed=True, audible=True)

# (state before, event, the actions, the phase after them given the state they leave)
ROWS = [
    # speaking over the reply stops it, now
    (CallState(P.SPEAKING, REPLYING, playing=True), Event("speech", 3),
     (A.BARGE, A.SHOW), P.HEARING),
    # a typed turn's reply is spoken over the same way
    (CallState(P.SPEAKING, TYPED, playing=True), Event("speech", 4), (A.BARGE, A.SHOW), P.HEARING),
    (CallState(), Event("speech", 1), (A.SHOW,), P.HEARING),
    (CallState(P.HEARING), Event("partial", 1, "what"), (A.SHOW,), P.HEARING),
    # the held reply: prepared at the pause, nothing sent until the end is decided
    (CallState(P.HEARING), Event("candidate", 3, "what time is it"), (A.PREPARE,), P.HEARING),
    (CallState(P.HEARING, TYPED), Event("candidate", 3, "what time is it"),
     (A.BARGE, A.PREPARE), P.HEARING),
    (CallState(P.HEARING, PREPARED), Event("candidate", 3, "what time is it"), (), P.HEARING),
    # the merge window: the person went on; the prepared (or committed) reply is forgotten
    (CallState(P.HEARING, PREPARED), Event("resumed", 3), (A.DISCARD, A.SILENCE), P.HEARING),
    (CallState(P.THINKING, TurnView(3, "and so", committed=True)), Event("resumed", 3),
     (A.DISCARD, A.SILENCE), P.HEARING),
    (CallState(P.LISTENING), Event("resumed", 3), (), P.HEARING),
    # the stored-twice turn: the final of a prepared utterance commits it, no second turn
    (CallState(P.HEARING, PREPARED), Event("final", 3, "what time is it"),
     (A.COMMIT, A.SHOW), P.THINKING),
    # the final heard other words than were prepared for: that reply goes, this one starts
    (CallState(P.HEARING, PREPARED), Event("final", 3, "what time is it in Lisbon"),
     (A.DISCARD, A.START, A.SHOW), P.THINKING),
    # a deep request is never prepared: its final starts it
    (CallState(P.HEARING), Event("final", 3, "research this for an hour"),
     (A.START, A.SHOW), P.THINKING),
    # the merge window passed: the turn is kept once its reply has played out
    (CallState(P.SPEAKING, REPLYING, playing=True), Event("closed", 2), (A.KEEP,), P.SPEAKING),
    (CallState(P.HEARING), Event("closed", 2), (), P.HEARING),
    (CallState(P.HEARING, PREPARED), Event("ignored", 3), (A.DISCARD, A.SHOW), P.LISTENING),
    # a cough beside the reply: the reply goes on
    (CallState(P.HEARING, REPLYING, playing=True), Event("ignored", 4), (A.SHOW,), P.SPEAKING),
    (CallState(P.HEARING), Event("ignored", 4), (A.SHOW,), P.LISTENING),
    (CallState(P.SPEAKING, REPLYING), Event("notice", 0), (A.SHOW,), P.SPEAKING),
    # a typed turn during a reply, push-to-talk during a call: the newer turn stops it
    (CallState(P.SPEAKING, REPLYING, playing=True), Event("typed", text="and in Paris?"),
     (A.BARGE, A.START, A.SHOW), P.THINKING),
    (CallState(), Event("typed", text="and in Paris?"), (A.START, A.SHOW), P.THINKING),
    # Stop: the session ended the turn (the call lets go of it first)
    (CallState(P.SPEAKING, playing=True), Event("stop", 2), (A.SILENCE,), P.SPEAKING),
    (CallState(P.THINKING), Event("stop", 2), (A.SILENCE,), P.LISTENING),
    (CallState(P.THINKING, THINKING), Event("audio", 2), (), P.SPEAKING),
    (CallState(P.LISTENING), Event("audio", 2), (), P.LISTENING),
    # the reply ended while the person speaks: what they say decides, not the reply's end
    (CallState(P.HEARING), Event("ended", 2), (), P.HEARING),
    (CallState(P.THINKING, TYPED), Event("ended", 2), (), P.THINKING),
    (CallState(P.SPEAKING, playing=True), Event("ended", 2), (), P.SPEAKING),
    (CallState(P.HEARING), Event("played_out"), (), P.HEARING),
    (CallState(P.SPEAKING), Event("played_out"), (), P.LISTENING),
    (CallState(P.SPEAKING, REPLYING, playing=True), Event("logout"),
     (A.BARGE, A.END_CALL), None),
    # the backchannel: "mm-hmm" over the reply keeps the floor (its turn still running, or
    # only its audio still playing); nothing shown, no turn
    (CallState(P.SPEAKING, REPLYING, playing=True), Event("speech", 3, "Mm-hmm.", 0.6),
     (A.ASIDE,), P.SPEAKING),
    (CallState(P.SPEAKING, playing=True), Event("speech", 3, "I see.", 0.7),
     (A.ASIDE,), P.SPEAKING),
    # ... and its own events after it are overlooked while its words stay one
    *[(CallState(P.SPEAKING, REPLYING, playing=True, aside=3), Event(kind, 3, text), (),
       P.SPEAKING)
      for kind, text in [("speech", "Yeah."), ("partial", "Mm-hmm"), ("candidate", "Mm-hmm."),
                         ("resumed", ""), ("final", "Mm-hmm."), ("closed", ""),
                         ("ignored", "")]],
    # ... unless they go on into something else: then it stops the reply like any speech
    (CallState(P.SPEAKING, REPLYING, playing=True, aside=3), Event("speech", 3, "Wait.", 0.4),
     (A.HEED, A.BARGE, A.SILENCE, A.SHOW), P.HEARING),
    (CallState(P.SPEAKING, REPLYING, playing=True, aside=3), Event("partial", 3, "Yeah, but"),
     (A.HEED, A.BARGE, A.SILENCE, A.SHOW), P.HEARING),
    (CallState(P.SPEAKING, playing=True, aside=3), Event("candidate", 3, "Okay, and then?"),
     (A.HEED, A.BARGE, A.SILENCE, A.PREPARE), P.HEARING),
    (CallState(P.SPEAKING, REPLYING, playing=True, aside=3), Event("final", 3, "Right, but why"),
     (A.HEED, A.BARGE, A.SILENCE, A.START, A.SHOW), P.THINKING),
    # "wait", "no", a question, more than a few words, or a long sound stop it at once
    *[(CallState(P.SPEAKING, REPLYING, playing=True), Event("speech", 3, text, voiced),
       (A.BARGE, A.SHOW), P.HEARING)
      for text, voiced in [("Wait.", 0.4), ("Stop.", 0.5), ("No.", 0.4), ("Right?", 0.4),
                           ("Yeah, tell me more about that.", 1.5), ("Okay", 1.4)]],
]  # fmt: skip


def _after(state: CallState, actions: tuple[Action, ...], event: Event) -> CallState:
    """The state the actions leave (what the session would have after carrying them out)."""
    turn, playing = state.turn, state.playing
    for action in actions:
        if action in (A.BARGE, A.DISCARD):
            turn, playing = None, False if action is A.DISCARD else playing
        elif action is A.PREPARE:
            turn = TurnView(event.utterance, event.text, committed=False)
        elif action is A.START:
            turn = TurnView(event.utterance, event.text)
        elif action is A.COMMIT and turn is not None:
            turn = TurnView(turn.utterance, turn.text, committed=True)
    return CallState(state.phase, turn, playing)


@pytest.mark.parametrize(("state", "event", "actions", "phase"), ROWS)
def test_row(state, event, actions, phase):
    step = decide(state, event)
    assert step.actions == actions, step.row.why
    assert resolve(step.next, state, _after(state, actions, event)) == phase, step.row.why


def test_every_row_of_the_table_has_a_test():
    used = {decide(state, event).row for state, event, _, _ in ROWS}
    assert [row.why for row in TABLE if row not in used] == []


def test_every_event_in_every_state_has_a_row():
    turns = [None, PREPARED, REPLYING, TYPED]
    kinds = ["speech", "partial", "candidate", "resumed", "final", "closed", "ignored", "notice",
             "typed", "stop", "audio", "ended", "played_out", "logout"]  # fmt: skip
    texts = ["what time is it", "Mm-hmm.", ""]
    for phase, turn, kind, utterance, text, aside in itertools.product(
        P, turns, kinds, [2, 3, 4, -1], texts, [None, 3]
    ):
        for playing in (False, True):  # no raise
            decide(CallState(phase, turn, playing, aside), Event(kind, utterance, text))


@pytest.mark.parametrize(
    "text",
    ["Mm-hmm.", "Mhm.", "Uh-huh.", "Right.", "Yeah.", "Okay.", "OK", "I see.", "All right.",
     "Yeah, yeah.", "Oh, I see.", "Mm-hmm, right.", "Hmm."],
)  # fmt: skip
def test_acknowledgements_as_whisper_writes_them_are_backchannels(text):
    assert backchannel(text, 0.6)


@pytest.mark.parametrize(
    "text",
    ["Wait.", "Stop.", "No.", "Wait, what?", "Right?", "What do you mean?", "Yeah, but why",
     "Okay, stop.", "in a month.", "yeah yeah yeah yeah yeah", "", "Hold on."],
)  # fmt: skip
def test_anything_else_is_not_a_backchannel(text):
    assert not backchannel(text, 0.6)


def test_a_long_sound_is_not_a_backchannel_whatever_it_was_heard_as():
    assert backchannel("Yeah.", 1.2) and not backchannel("Yeah.", 1.3)


def test_relation_tells_the_same_words_from_other_words():
    state = CallState(P.HEARING, PREPARED)
    assert relation(state, Event("final", 3, "what time is it")) == "same_text"
    assert relation(state, Event("final", 3, "what time")) == "same"
    assert relation(state, Event("final", 4, "what time is it")) == "other"
    assert relation(CallState(), Event("final", 3)) == "none"


def test_a_notice_waits_for_quiet_and_silence_is_the_calls_only_when_nobody_talks():
    assert quiet(CallState())
    assert not quiet(CallState(P.HEARING))  # the person speaks
    assert not quiet(CallState(P.LISTENING, playing=True))  # the reply's audio still plays
    assert not quiet(CallState(P.LISTENING, PREPARED))  # a reply is on its way
    assert busy(CallState(P.THINKING)) and busy(CallState(P.LISTENING, TYPED))
    assert not busy(CallState())


def test_settled_phase_follows_what_is_left():
    assert settled(CallState(P.HEARING, playing=True)) == P.SPEAKING
    assert settled(CallState(P.HEARING, THINKING)) == P.THINKING
    assert settled(CallState(P.HEARING, REPLYING)) == P.SPEAKING
    assert settled(CallState(P.SPEAKING)) == P.LISTENING
    assert resolve(KEEP, CallState(P.THINKING), CallState()) == P.THINKING
    assert resolve(SETTLE, CallState(P.THINKING), CallState()) == P.LISTENING


def test_what_the_page_is_shown_for_each_event():
    assert shown(Event("final", 3, "hi"), 3) == {"kind": "turn", "utterance": 3, "text": "hi"}
    assert shown(Event("typed", text="hi"), -2) == {"kind": "turn", "utterance": -2, "text": "hi"}
    assert shown(Event("speech", 3), 3) == {"kind": "speech", "utterance": 3}
    assert shown(Event("ignored", 3), 3, "echo")["reason"] == "echo"
    assert shown(Event("notice"), 0, "speech server down") == {
        "kind": "error",
        "text": "speech server down",
    }
    assert shown(Event("stop"), 0) is None
