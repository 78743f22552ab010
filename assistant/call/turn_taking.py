"""A call's turn-taking, as one table: the call's state and an event -> the actions, in order,
and the state the call is in after them.

Pure: no asyncio, no I/O, no clock. The call session (`assistant.call.call`) builds a
`CallState` from what it knows, asks `decide`, and carries the actions out; everything a
person can see or hear of whose turn it is follows from a row below, and each row has a test
(`tests/test_turn_taking.py`). The races fixed so far are rows, named where they are:

- *the stored-twice turn*: the committed end of an utterance whose reply was prepared at its
  candidate end commits that reply; a second one is never started (it was stored twice);
- *the held reply*: a reply prepared at a candidate end is held (nothing sent, nothing
  stored) until the end is committed;
- *the merge window*: the person going on soon after a committed end drops the reply started
  for it, never stored, and the whole is answered as one turn; a turn is kept only once the
  listener says the window has passed (`closed`, on the audio's clock): it arrives in order
  after any `resumed`, so no poll is needed to tell which came first;
- *a typed turn during a reply*, and *push-to-talk during a call*: a turn of the call, which
  stops the reply in progress (kept as far as it was heard) and is answered aloud;
- *the backchannel* (issue 51): a short acknowledgement ("mm-hmm", "right", "yeah", "ok",
  "I see") said while the reply plays keeps the floor: the reply goes on, and that utterance's
  events are overlooked (nothing shown, no turn, nothing stored) unless its words go on into
  something else, which then stops the reply as any other speech does. Decided from what the
  listener heard when it said "speech" over a reply (it waits for words before it does: the
  echo guard) and the voiced length (`backchannel`).

The listener's own rules (the reply's echo, a verdict landing between a backlog's chunks) are
in `assistant.call.listener`; what reaches this table is what it decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Literal


class Phase(StrEnum):
    """What the page shows of the call (sent as `{"kind": "state"}`)."""

    LISTENING = "listening"
    HEARING = "hearing"
    THINKING = "thinking"
    SPEAKING = "speaking"


BUSY = frozenset({Phase.HEARING, Phase.THINKING, Phase.SPEAKING})


@dataclass(frozen=True)
class TurnView:
    """The call's current turn, as far as turn-taking needs it."""

    utterance: int
    """The listener's number for what the person said; below zero for typed turns and notices."""
    text: str
    committed: bool = True
    """False while its reply is prepared on a candidate end, held until the end is decided."""
    audible: bool = False
    """Its reply's first audio was sent."""


@dataclass(frozen=True)
class CallState:
    phase: Phase = Phase.LISTENING
    turn: TurnView | None = None
    playing: bool = False
    """Reply audio is still playing on the page (the echo guard is on)."""
    aside: int | None = None
    """The listener's number for the utterance taken as a backchannel: its events are
    overlooked while its words stay one."""


EventKind = Literal[
    # from the listener (`assistant.call.hearing.Heard`)
    "speech", "partial", "candidate", "resumed", "final", "closed", "ignored", "notice",
    # from the session's other inputs
    "typed",  # a question typed on the page, or said with push-to-talk, during the call
    "stop",  # the session stopped the call's turn (Stop on its conversation: the one cancel)
    "audio",  # the current turn's reply audio went out
    "ended",  # the current turn's task ended (done, failed or stopped)
    "played_out",  # the reply's audio has played out on the page
    "logout",  # the call's login is gone
]  # fmt: skip


@dataclass(frozen=True)
class Event:
    kind: EventKind
    utterance: int = 0
    text: str = ""
    voiced_s: float | None = None
    """On "speech": how long the person had spoken (None: not known)."""


class Action(Enum):
    """What the session does, in the row's order."""

    BARGE = "barge"
    """Stop the current turn (kept as far as it was heard when committed, else forgotten) and
    tell the page to stop playing it."""
    DISCARD = "discard"
    """Forget the current turn: cancelled, never stored (the person went on, or it was noise)."""
    SILENCE = "silence"
    """Tell the page to stop playing (`{"kind": "barge"}`) for the event's utterance."""
    PREPARE = "prepare"
    """Start a turn on the candidate's text, its events held until the end is committed (not
    for the deep lane: no job for words that may go on)."""
    COMMIT = "commit"
    """The prepared turn is the person's: its held events go out."""
    KEEP = "keep"
    """The window for going on with the turn has passed: once its reply has played out it is
    stored (until then, the person going on would make it part of a longer turn)."""
    START = "start"
    """Start a committed turn on the event's text."""
    SHOW = "show"
    """Tell the page what was heard (speech, partial, ignored, the committed turn, an error)."""
    END_CALL = "end_call"
    ASIDE = "aside"
    """The event's utterance is a backchannel: its events are overlooked from now on."""
    HEED = "heed"
    """The utterance taken as a backchannel went on into other words: heard from now on."""


KEEP = "keep"
"""The row leaves the phase as it is."""
SETTLE = "settle"
"""The phase follows from what is left (`settled`): speaking while audio plays, thinking while
a turn waits for its first audio, else listening."""

Next = Phase | Literal["keep", "settle", "closed"]

Relation = Literal[
    "none", "same", "same_text", "other", "any", "turn", "backchannel", "aside", "aside_over"
]
"""How the event stands to the current turn: no turn; the turn's own utterance (`same_text`:
and the same words); another one. `any` matches every relation, `turn` every one but `none`.
Before those, how it stands to the reply playing: `backchannel`, speech over it that is only
an acknowledgement; `aside`, an event of the utterance taken for one, its words still one;
`aside_over`, that utterance's words are something else now."""


@dataclass(frozen=True)
class Row:
    event: EventKind
    relation: Relation
    actions: tuple[Action, ...]
    next: Next
    why: str
    phases: frozenset[Phase] | None = None
    """Only in these phases (None: in any)."""


A = Action
P = Phase
GO_ON = "the backchannel went on into other words: the reply stops now"
OVERLOOKED = "the backchannel's own events: overlooked, the reply keeps the floor"
# The table. First match wins: a row with a wider relation comes after the narrower ones.
TABLE: tuple[Row, ...] = (
    Row("speech", "backchannel", (A.ASIDE,), KEEP,
        "the backchannel: \"mm-hmm\", \"right\" over the reply keep the floor; not shown, "
        "no turn"),
    Row("speech", "aside_over", (A.HEED, A.BARGE, A.SILENCE, A.SHOW), P.HEARING, GO_ON),
    Row("partial", "aside_over", (A.HEED, A.BARGE, A.SILENCE, A.SHOW), P.HEARING, GO_ON),
    Row("candidate", "aside_over", (A.HEED, A.BARGE, A.SILENCE, A.PREPARE), P.HEARING, GO_ON),
    Row("final", "aside_over", (A.HEED, A.BARGE, A.SILENCE, A.START, A.SHOW), P.THINKING, GO_ON),
    *(Row(kind, "aside", (), KEEP, OVERLOOKED) for kind in (
        "speech", "partial", "candidate", "resumed", "final", "closed", "ignored")),
    Row("speech", "other", (A.BARGE, A.SHOW), P.HEARING,
        "speaking over the reply stops it, now"),
    Row("speech", "any", (A.SHOW,), P.HEARING,
        "someone speaks (the same utterance going on keeps its turn: `resumed` decides)"),
    Row("partial", "any", (A.SHOW,), KEEP, "the transcript grows"),
    Row("candidate", "none", (A.PREPARE,), KEEP,
        "the held reply: prepared at a pause, held until the end is decided"),
    Row("candidate", "other", (A.BARGE, A.PREPARE), KEEP,
        "a pause in a newer utterance: the older turn is over"),
    Row("candidate", "any", (), KEEP, "the same pause heard again: prepared already"),
    Row("resumed", "same", (A.DISCARD, A.SILENCE), P.HEARING,
        "the merge window: the person went on; the turn is answered whole, its reply forgotten"),
    Row("resumed", "any", (), P.HEARING, "went on from a turn no longer running"),
    Row("final", "same_text", (A.COMMIT, A.SHOW), P.THINKING,
        "the stored-twice turn: the prepared reply is committed, no second one started"),
    Row("final", "turn", (A.DISCARD, A.START, A.SHOW), P.THINKING,
        "other words than were prepared for: that reply is forgotten, the final's answered"),
    Row("final", "none", (A.START, A.SHOW), P.THINKING,
        "the end, with nothing prepared (a deep request waits for it)"),
    Row("closed", "same", (A.KEEP,), KEEP,
        "the merge window: passed, the turn is the person's; kept once its reply played out"),
    Row("closed", "any", (), KEEP, "the window of a turn no longer running"),
    Row("ignored", "same", (A.DISCARD, A.SHOW), SETTLE,
        "noise, echo or no words: what was prepared for it is forgotten"),
    Row("ignored", "any", (A.SHOW,), SETTLE, "noise beside a reply: the reply goes on"),
    Row("notice", "any", (A.SHOW,), KEEP, "said to the person (a speech server failing)"),
    Row("typed", "turn", (A.BARGE, A.START, A.SHOW), P.THINKING,
        "a typed turn during a reply, push-to-talk during a call: the newer turn stops it"),
    Row("typed", "none", (A.START, A.SHOW), P.THINKING,
        "typed or push-to-talk during a call: a turn of the call, answered aloud"),
    Row("stop", "any", (A.SILENCE,), SETTLE,
        "Stop: the session (the one cancel) ended the reply, kept as far as heard; the page "
        "stops playing it"),
    Row("audio", "turn", (), P.SPEAKING, "the reply is heard"),
    Row("audio", "none", (), KEEP, "audio of a turn already gone (a notice's, a race)"),
    Row("ended", "any", (), KEEP, "the person is speaking: what they say decides",
        phases=frozenset({P.HEARING})),
    Row("ended", "turn", (), KEEP, "a newer turn has the call"),
    Row("ended", "none", (), SETTLE, "the turn is over; its audio may still play"),
    Row("played_out", "any", (), KEEP, "the person is speaking: what they say decides",
        phases=frozenset({P.HEARING})),
    Row("played_out", "any", (), SETTLE, "the page played it all: the echo guard is off"),
    Row("logout", "any", (A.BARGE, A.END_CALL), "closed",
        "the login is gone: the reply stops, the call ends"),
)  # fmt: skip


@dataclass(frozen=True)
class Step:
    actions: tuple[Action, ...]
    next: Next
    row: Row


def relation(state: CallState, event: Event) -> Relation:
    if event.utterance == state.aside and event.kind in ASIDE_KINDS:
        if event.kind in TEXT_KINDS and not backchannel(event.text):
            return "aside_over"
        return "aside"
    rel = _relation(state, event)
    over_reply = state.playing and rel in ("none", "other")
    if event.kind == "speech" and over_reply and backchannel(event.text, event.voiced_s):
        return "backchannel"
    return rel


ASIDE_KINDS = frozenset({"speech", "partial", "candidate", "resumed", "final", "closed", "ignored"})
TEXT_KINDS = frozenset({"speech", "partial", "candidate", "final"})


def _relation(state: CallState, event: Event) -> Literal["none", "same", "same_text", "other"]:
    turn = state.turn
    if turn is None:
        return "none"
    if turn.utterance != event.utterance:
        return "other"
    return "same_text" if event.kind == "final" and turn.text == event.text else "same"


BACKCHANNELS = frozenset({
    "mm hmm", "mm hm", "mhm", "mmhmm", "m hm", "hmm", "hm", "mm", "mmm", "uh huh", "um hum",
    "right", "yeah", "yep", "yes", "ok", "okay", "alright", "all right", "i see", "sure",
    "got it", "cool", "exactly", "true", "oh", "ah", "aha",
})  # fmt: skip
"""Acknowledgements, as Whisper writes them (lower case, hyphens as spaces, no punctuation):
tiny.en writes "Mm-hmm.", "Uh-huh.", "Okay." (for "OK" too), "All right.", "I see."."""
BACKCHANNEL_WORDS = 4
"""A few words at most ("yeah, yeah, I see"); more is something to say."""
BACKCHANNEL_S = 1.2
"""Voiced time at most: the app's voice says "I see" in 0.66 s, 0.84 s at 0.8 x speed; the
listener waits for words over a reply for up to 1.5 s of speech, so longer is never one."""


def backchannel(text: str, voiced_s: float | None = None) -> bool:
    """Whether `text` (heard over the reply, for `voiced_s` seconds) is only an acknowledgement:
    a few words made of `BACKCHANNELS` phrases ("mm-hmm, right"). "Wait", "stop", "no", a
    question, or more words are not."""
    if voiced_s is not None and voiced_s > BACKCHANNEL_S:
        return False
    if "?" in text:
        return False
    said = "".join(c if c.isalnum() or c == "'" else " " for c in text.lower()).split()
    if not said or len(said) > BACKCHANNEL_WORDS:
        return False
    i = 0
    while i < len(said):  # made of whole phrases, longest first
        for n in (2, 1):
            if " ".join(said[i : i + n]) in BACKCHANNELS:
                i += n
                break
        else:
            return False
    return True


def _matches(row: Row, phase: Phase, rel: str) -> bool:
    if row.phases is not None and phase not in row.phases:
        return False
    if row.relation == "any":
        return True
    if row.relation == "turn":
        return rel in ("same", "same_text", "other")
    if row.relation == "same":
        return rel in ("same", "same_text")
    return row.relation == rel


def decide(state: CallState, event: Event) -> Step:
    """The row for `event` in `state`: what to do, in order, and where the call goes."""
    rel = relation(state, event)
    for row in TABLE:
        if row.event == event.kind and _matches(row, state.phase, rel):
            return Step(row.actions, row.next, row)
    raise ValueError(f"no row for {event.kind!r} ({rel})")  # the table covers every event


def settled(state: CallState) -> Phase:
    """The phase when nothing new happens: the reply still playing is heard; a turn waiting
    for its first audio is being thought about; else the call listens."""
    if state.playing:
        return Phase.SPEAKING
    if state.turn is not None:
        return Phase.SPEAKING if state.turn.audible else Phase.THINKING
    return Phase.LISTENING


def resolve(next_: Next, before: CallState, after: CallState) -> Phase | None:
    """The phase a step leads to, given the state `after` its actions (None: the call ends)."""
    if next_ == "closed":
        return None
    if next_ == KEEP:
        return before.phase
    if next_ == SETTLE:
        return settled(after)
    return Phase(next_)


def quiet(state: CallState) -> bool:
    """Nothing is said either way: a job's notice may be spoken now."""
    return state.turn is None and state.phase == Phase.LISTENING and not state.playing


def busy(state: CallState) -> bool:
    """Someone is talking or a reply is on its way: silence is not yet the call's."""
    return state.turn is not None or state.phase in BUSY
