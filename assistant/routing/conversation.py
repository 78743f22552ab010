"""What the conversation says about its last message, read by rules (issue 30).

A message alone can be misread: "ok do it" is small talk unless the assistant had just offered
to draft a plan; "now the same for Berlin" is research after a research request and chat after
a weather question; "how's it coming along?" is about the running job, not a new task. The
router reads the last few turns through the rules here, in microseconds and without an engine
call, and asks its classifier only about the text a rule points at (the offered task, the
earlier request), so each decision still says what decided it.

The rules, first match wins:
- an acceptance ("yes please", "ok do it", "go ahead") of the assistant's last offer: the
  offered task is what is routed, and it is the job's text;
- a refusal of the offer ("no thanks", "not now"): chat; any other short reply to it with
  nothing against it, no question and no new request ("interested!") accepts it;
- a question about the job of this conversation that is running or just finished ("is it
  done?"): chat;
- a follow-up that only makes sense with the earlier request ("now do the same for Berlin",
  "make it shorter and add a worksheet"): the earlier request's lane, with both as the task.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from assistant.records import Lane
from assistant.routing.spoken import strip_fillers

JobState = Literal["running", "done"]
READ_CHARS = 4000
"""Of each earlier message the router reads at most this much: a request's start, a reply's
end (where it offers; a notice is read in its last 300 characters). The encoder reads a few
hundred tokens at most, and a client's history is its own to make as long as it likes: one
1 MB reply held the event loop 1.5 s for one decision (the GIL, in the router's thread)."""


def _read(role: str, text: str) -> tuple[str, str]:
    return role, (text[:READ_CHARS] if role == "user" else text[-READ_CHARS:])


@dataclass(frozen=True)
class Conversation:
    """What the router reads besides the last message: the turns before it, oldest first."""

    turns: tuple[tuple[str, str], ...] = ()
    """(role, text) per message before the last one; role "user" or "assistant"."""
    offer: str | None = None
    """The task the assistant's last reply offered to take on, when the app recorded it; None:
    found in the last reply's text (a client's history carries no record)."""
    job: JobState | None = None
    """A job of this conversation is running (or queued), or has just finished."""
    last_lane: Lane | None = None
    """The lane the earlier request went to, when known (stored turns); else it is routed again."""
    last_task: str = ""
    """That request's task as it was routed (an accepted offer's task, not "yes please")."""

    @classmethod
    def of_exchanges(cls, pairs: Sequence[tuple[str, str]], **known: object) -> Conversation:
        """From (request, reply) pairs, as stored and as an OpenAI client sends them: all of
        them, as `Router.decide` is scored (the classifier reads how long the conversation is
        and every earlier hand-off notice; issue 50: three pairs kept decided otherwise)."""
        turns: list[tuple[str, str]] = []
        for asked, replied in pairs:
            turns += [_read("user", asked), _read("assistant", replied)]
        return cls(turns=tuple(turns), **known)  # type: ignore[arg-type]

    @classmethod
    def of_messages(cls, messages: Sequence[dict]) -> Conversation:
        """From OpenAI-style messages ({"role", "content"}) before the last user message."""
        turns = tuple(
            _read(str(m.get("role")), str(m.get("content") or ""))
            for m in messages
            if m.get("role") in ("user", "assistant")
        )
        return cls(turns=turns)

    def last(self, role: str) -> str:
        return next((t for r, t in reversed(self.turns) if r == role), "")

    def before_last_request(self) -> Conversation:
        """The conversation as it stood when the earlier request was made."""
        i = max((n for n, (r, _) in enumerate(self.turns) if r == "user"), default=0)
        return Conversation(turns=self.turns[:i])

    def standing_offer(self) -> str | None:
        """The task the assistant's last message offered, recorded or found in its text."""
        if not self.turns or self.turns[-1][0] != "assistant":
            return None
        return self.offer if self.offer is not None else find_offer(self.turns[-1][1])


@dataclass(frozen=True)
class Reading:
    """What a rule made of the last message."""

    reason: str
    """What decided it, for a person: "accepts the offer to draft the plan"."""
    lane: Lane | None = None
    """The lane, when the rule decides it alone; None: the classifier on `ask`."""
    ask: str = ""
    """The text the classifier reads instead of the message (the offered task, the request)."""
    task: str = ""
    """What a deep job is asked to do."""
    inherit: bool = False
    """The lane is the earlier request's (routed again when not known)."""


# --- offers --------------------------------------------------------------------------------

_S = r"[^.?!\n]"  # within one sentence
_TASK = rf"({_S}{{6,}}?)"
_END = r"\s*(?:[.!?]|$)"  # a reply may end unpunctuated (a transcript, a cut stream)
_INVITE = (
    r"(?:shall|should)\s+I(?:\s+go\s+ahead)?|(?:do\s+you\s+)?want\s+(?:me\s+to|that|it)"
    r"|would\s+you\s+like\s+(?:me\s+to|that|it)|just\s+say\s+(?:the\s+word|so)"
    r"|would\s+(?:that|it|this)\s+(?:be\s+)?(?:useful|helpful|help|work)|interested"
    r"|let\s+me\s+know|if\s+(?:that\s+helps|you(?:'d|\s+would)?\s+(?:like|want)"
    r"(?:\s+(?:that|it|me\s+to))?)"
)
_OFFERS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # "I can draft the whole plan, shall I?" / "I could X. Just say the word." / "I can X
        # if you want"
        rf"\bI\s+(?:can|could)\s+(?:also\s+)?{_TASK}\s*(?:for\s+you\s*)?(?:[,;:.\u2014-]+\s*|\s+)"
        rf"(?:just\s+)?(?:{_INVITE}){_END}",
        # "Shall I put together a full plan?" / "Want me to write it up?" / "Would it help if
        # I reviewed the setup?"
        rf"\b(?:shall|should)\s+I\s+(?:go\s+ahead\s+and\s+)?{_TASK}\s*(?:\?|$)",
        rf"\b(?:want|would\s+you\s+like|do\s+you\s+want|how\s+about\s+I|would\s+it\s+help\s+if"
        rf"\s+I)\s+(?:me\s+to\s+)?(?:go\s+ahead\s+and\s+)?{_TASK}\s*(?:\?|$)",
        # "Let me know if you'd like me to write the full report."
        rf"\blet\s+me\s+know\s+if\s+you(?:'d|\s+would)?\s+(?:like|want)\s+me\s+to\s+{_TASK}{_END}",
        # "If you like, I can write the whole migration script."
        rf"\bif\s+you(?:'d|\s+would)?\s+(?:like|want)(?:\s+(?:that|it))?,?\s+I\s+(?:can|could)"
        rf"\s+(?:also\s+)?{_TASK}{_END}",
        # "I'd be glad to write a full evaluation." / "Happy to build the model, if that helps."
        rf"\b(?:I(?:'d|\s+would)\s+be|I'?m)\s+(?:happy|glad|delighted|ready)\s+to\s+{_TASK}"
        rf"(?:,?\s+if\s+(?:that\s+helps|you(?:'d)?\s+(?:like|want)))?{_END}",
        rf"(?:^|[.!?]\s+)(?:happy|glad|ready\s+when\s+you\s+are)\s+to\s+{_TASK}(?:,?\s+if\s+(?:that\s+helps|you(?:'d)?"
        rf"\s+(?:like|want)))?{_END}",
    )
)
_TAIL = 280
"""Characters of a reply's end that are searched: an offer closes a reply."""
_TRIM = re.compile(r"^(?:me\s+to\s+|go\s+ahead\s+and\s+)+|\s+(?:for\s+you|now|then)$", re.I)


def find_offer(reply: str) -> str | None:
    """The task an assistant's reply offers to take on ("draft the whole migration plan with
    timelines"), or None. The chat prompt asks the model to end an offer as "Shall I <task>?",
    which the first patterns read; the others catch the ways models phrase it anyway."""
    tail = (reply or "").strip()[-_TAIL:]
    for pattern in _OFFERS:
        found = [m for m in pattern.finditer(tail)]
        if found:
            task = _TRIM.sub("", found[-1].group(1).strip(" ,")).strip(" ,")
            if len(task.split()) >= 2:
                return task
    return _proposal(tail)


# The last resort: a closing sentence in which the assistant proposes something of its own
# ("If it's useful I can write up a charter for the team."). Its action is the task, and the
# classifier decides whether taking it on is hard work.
_SENTENCE = re.compile(r"[^.?!\n]+[.?!]*")
_PROPOSES = re.compile(
    r"\b(?:I\s+(?:can|could)|I'm\s+happy|me\s+to|shall\s+I|should\s+I)\s+"
    r"(?:(?:also|gladly|happily|be\s+happy\s+to|be\s+glad\s+to|go\s+ahead\s+and)\s+)*"
    r"(?P<task>.+?)\s*(?:[.?!]|$)",
    re.IGNORECASE,
)


def _proposal(tail: str) -> str | None:
    """In the last sentence, or the one before a short invitation ("Would that be useful?")."""
    if _HANDED_OFF.search(tail):  # a hand-off notice promises, it offers nothing
        return None
    last_two = _SENTENCE.findall(tail.rstrip())[-2:]
    asks = bool(last_two) and last_two[-1].rstrip().endswith("?")
    # a proposal asks, is conditional, or is followed by a question ("I can see why." is none)
    found = next(
        (
            m
            for t in reversed(last_two)
            if (asks or re.search(r"\bif\b", t, re.I)) and (m := _PROPOSES.search(t))
        ),
        None,
    )
    if found is None:
        return None
    task = _TRIM.sub("", re.sub(_INVITE + r"\W*$", "", found["task"], flags=re.I).strip(" ,"))
    return task.strip(" ,") if len(task.split()) >= 3 else None


# --- the last message's shape -------------------------------------------------------------

_VERY = r"(?:really\s+|very\s+|so\s+|super\s+|most\s+|extremely\s+|just\s+)?"
_GOOD = (
    r"(?:great|good|nice|helpful|perfect|lovely|brilliant|amazing|useful|ideal|fantastic|"
    r"excellent|wonderful|fine|like\s+a\s+plan|help|ace|sweet)"
)
_YES = (
    r"yes|yeah|yep|yup|ya|sure|ok|okay|k|alright|all\s+right|right|absolutely|definitely"
    r"|of\s+course|please|pls|great|perfect|cool|fine|good|nice|lovely|brilliant|awesome"
    rf"|why\s+not|sure\s+thing|by\s+all\s+means|(?:that|this|it)?\s*sounds?\s+{_VERY}{_GOOD}"
    rf"|(?:that|this|it)(?:'d|\s+would|'ll|\s+will)\s+(?:be\s+)?{_VERY}{_GOOD}"
    rf"|i(?:'d|\s+would)\s+{_VERY}(?:like|love|appreciate)\s+(?:that|it)"
    r"|go(?:\s+(?:ahead|for\s+it|on))?|please\s+do|do\s+(?:it|that|so|this)|let'?s\s+(?:do\s+"
    r"(?:it|that|this)|go|have\s+it)|start(?:\s+(?:it|on\s+it|that))?|proceed|make\s+it\s+so"
    r"|get\s+(?:started|going|on\s+it)|kick\s+it\s+off|yes\s+please"
    r"|(?:draft|write|make|build|prepare|run|create|put\s+together|send|start|do)"
    r"\s+(?:it|that|them|one|this)(?:\s+up)?|i'?m\s+in|deal|(?:uh[\s-]+)?huh|mhm|exactly"
    r"|(?:that|it)\s+works|works\s+for\s+me|very\s+much\s+so|yes\s+very"
    r"|(?:that'?s\s+)?(?:exactly\s+|just\s+)?what\s+i\s+(?:need|want)(?:ed)?|that'?s\s+perfect"
    r"|(?:very\s+)?interested|keen|cheers|(?:do\s+)?(?:the\s+)?(?:full|whole|complete)\s+"
    r"(?:thing|lot|works|version|write-?up)|all\s+of\s+it|the\s+works"
)
_NO = (
    r"no|nope|nah|not\s+(?:now|yet|today|right\s+now)|no\s+(?:thanks|thank\s+you|need)"
    r"|maybe\s+later|later|don'?t(?:\s+bother)?|never\s*mind|skip\s+it|that'?s\s+(?:ok|okay|"
    r"fine|all)|i'?m\s+good|all\s+good|not\s+needed|pass"
)
_POLITE = r"thanks|thank\s+you|then|now|mate|for\s+me|so|just|and|oh|ah|very|much|indeed"
"""Words that may go with a yes but are none: "thanks" alone after an offer accepts nothing."""
_ANY_OF = r"^(?:(?:{})(?![\w'])[\s,.!;:-]*)+"
_ADD_WORDS = r"and|but|also|with|just|plus|make|include|add|keep|focus|use|cover|only"
_YES_ONLY = re.compile(_ANY_OF.format(_YES + "|" + _POLITE) + "$", re.IGNORECASE)
_ADD_START = re.compile(r"^(?:" + _ADD_WORDS + r")(?![\w'])", re.IGNORECASE)
_YES_WORDS = 8
"""Words a yes may take ("yes please, go ahead then"): only that many are matched, since a
phrase can split into the alternatives several ways and the tries multiply with its length."""
_SHORT_YES = 5
_A_YES = re.compile(
    r"(?<![\w'])(?:yes|yeah|yep|yup|sure|ok|okay|please|go\s+ahead|do\s+it|absolutely|perfect"
    r"|definitely|great)(?![\w'])",
    re.IGNORECASE,
)
_A_NO = re.compile(
    r"(?<![\w'])(?:no|not|nope|nah|don'?t|never|later|wait|hold|stop|but|instead|rather"
    r"|without|first|think|maybe|perhaps|hmm+|check|enough|all|bye|goodbye|night|already"
    r"|myself|ourselves|thanks|thank|cheers\s+for)(?![\w'])|n't\b",
    re.IGNORECASE,
)
_ASKS = re.compile(
    r"^(?:who|what|when|where|why|how|which|whose|is|are|was|were|can|could|do|does|did|will"
    r"|would|should|tell|explain|give|show|list|and|also|what's|who's|where's|how's)(?![\w'])",
    re.IGNORECASE,
)
_ONLY_POLITE = re.compile(_ANY_OF.format(_POLITE) + "$", re.IGNORECASE)
_HANDED_OFF = re.compile(r"\bhanded\s+(?:it\s+)?off\b|\bas\s+job\s+\w+|\bdeep\s+lane\b", re.I)
_REFUSES = re.compile(_ANY_OF.format(_NO) + r"(?:\S+(?:\s+\S+){0,5})?$", re.IGNORECASE)
"""A no, alone or with a few words after it ("no, I'll do it myself"); a no followed by a
longer request ("no, instead write ...") is that request, for the classifier."""
_STATUS = re.compile(
    r"\b(?:how(?:'s|\s+is|\s+are)\s+(?:it|that|things|(?:the|my|our)(?:\s+\w+){1,3}|you)\s+"
    r"(?:going|coming"
    r"(?:\s+along)?|looking|doing|getting\s+on)|(?:is|are)\s+(?:it|that|you|the\s+\w+|my\s+\w+)"
    r"\s+(?:done|ready|finished|complete|there)|any\s+(?:progress|news|update)|how\s+(?:long|"
    r"far|much\s+longer)|when\s+will\s+(?:it|that|the\s+\w+)\s+be|status|eta|still\s+(?:working"
    r"|running|going|thinking)|what'?s\s+(?:the\s+)?(?:holdup|hold-up|progress)"
    r"|(?:done|finished|ready)\s+yet|where\s+are\s+we\s+(?:at|with)"
    r"|^(?:all\s+)?(?:done|finished|ready)\W*$|^how'?s\s+(?:my|the|our)\s+\w+(?:\s+\w+)?\W*$)",
    re.IGNORECASE,
)
_SAME = re.compile(
    r"^(?:(?:and|now|ok(?:ay)?|so|great|thanks|cool|nice|then|also|right)[\s,.!]+)*"
    r"(?:(?:can\s+you\s+|could\s+you\s+|please\s+)?(?:do|make|write|run|repeat|redo|try|give\s+me)"
    r"\s+(?:the\s+same(?:\s+thing)?|that|it|this|one|the\s+same\s+analysis)"
    r"(?:\s+(?:again|too|as\s+well))?\s+(?:for|with|about|on|in|but\s+for)\s+(?P<a>.+)"
    r"|(?:the\s+)?same(?:\s+thing)?\s+(?:for|with|about|but\s+for|in)\s+(?P<b>.+)"
    r"|(?:what|how)\s+about\s+(?P<c>.+)|(?:and\s+)?(?:for|in)\s+(?P<d>.+?)\s+(?:too|instead"
    r"|as\s+well)|(?:and|now)\s+(?:for|in)\s+(?P<e>.+)"
    r"|(?:(?:and|now)\s+)?(?:one|another(?:\s+one)?)\s+(?:for|about|on)\s+(?P<f>.+))$",
    re.IGNORECASE,
)
_FORMAT = re.compile(
    r"^(?:just\s+|only\s+)?(?:a|an|one|two|three|four|five|\d+|a\s+few|few|plain|simple|short"
    r"|brief|fewer|bullet)?\s*(?:\w+\s+)?(?:line|lines|sentence|sentences|word|words|paragraph"
    r"|paragraphs|bullets?|bullet\s+points|points|terms|english|tweet|summary|nutshell)$",
    re.IGNORECASE,
)
"""A "place" in "and in one line?" that is a shape for the last answer, not a new subject."""

_REFINES = re.compile(
    r"^(?:(?:and|now|ok(?:ay)?|great|thanks|cool|nice|also|but|please|can\s+you|could\s+you)"
    r"[\s,.!]+)*(?:make\s+(?:it|that|them|the\s+\w+)|add|include|remove|drop|cut|shorten"
    r"|expand|lengthen|rewrite|rephrase|change|turn\s+(?:it|that)\s+into|redo|revise|split"
    r"|translate\s+(?:it|that)|convert\s+(?:it|that)|put\s+(?:it|that)|swap|replace|simplify"
    r"|tighten|extend|shorter|longer|(?:less|more)\s+\w+)\b",
    re.IGNORECASE,
)


# Hesitations as people say them, dropped before the rules read a message (the normaliser
# keeps some of them on purpose, and reads "yes" as an opener). Only the rules see this text.
_HESITATION = re.compile(
    r"(?<![\w'])(?:um+|uh+|uhm|mm+|mhm|er|ah|eh|erm|hm+|you\s+know|i\s+mean|sort\s+of"
    r"|kind\s+of|i\s+guess"
    r"|(?<!would\s)(?<!'d\s)(?<!\bi\s)like|(?<!do\s)so)(?![\w'])[,.]?",
    re.IGNORECASE,
)


_THUMBS = re.compile("[\U0001f44d\U0001f44c\u2705\U0001f64c\u2714]\ufe0f?")
"""A thumbs up, OK hand, check mark or raised hands: a yes as people type it."""


def _plain(text: str) -> str:
    """The message as the rules read it: no hesitations, one space between words."""
    text = _THUMBS.sub(" yes ", strip_fillers(text or ""))
    return re.sub(r"\s+", " ", _HESITATION.sub(" ", text)).strip()


def _short(task: str, words: int = 8) -> str:
    """A task as a reason shows it: its first few words."""
    cut = task.split()
    return " ".join(cut[:words]) + (" ..." if len(cut) > words else "")


def _acceptance(said: str) -> str | None:
    """What follows a yes ("" for a bare yes; "and include the costs"), or None: no yes."""
    words = said.split(" ")
    for k in range(min(len(words), _YES_WORDS), 0, -1):
        head, rest = " ".join(words[:k]), " ".join(words[k:])
        if rest and not _ADD_START.match(rest):
            continue
        if _YES_ONLY.match(head) and not _ONLY_POLITE.match(head):
            return rest
    # a short answer to an offer with nothing against it, no question and no new request
    # ("yes, lovely, cheers", "interested!", "that'd be ace"): people say yes in more ways
    # than any list holds, and a short reply to an offer is mostly one
    if len(words) > _SHORT_YES or "?" in said or _A_NO.search(said) or _ASKS.match(said):
        return None
    return "" if _A_YES.search(said) or not _ONLY_POLITE.match(said) else None


def read(text: str, conversation: Conversation | None) -> Reading | None:
    """The rule the conversation makes apply to `text`, or None: the message alone decides."""
    if conversation is None or not conversation.turns:
        return None
    said = _plain(text)
    offer = conversation.standing_offer()
    if offer:
        accepted = _acceptance(said)
        if accepted is not None:
            full = _offer_task(offer, accepted, conversation)
            return Reading(f"accepts the offer to {_short(offer)}", ask=offer, task=full)
        if len(said.split()) <= _YES_WORDS and _REFUSES.match(said):
            return Reading("declines the offer", lane="chat", task=said)
    if len(said.split()) <= 12 and _STATUS.search(said):
        handed = _HANDED_OFF.search(conversation.last("assistant")[-_TAIL:])
        if conversation.job is not None or conversation.last_lane == "deep" or handed:
            what = "the running job" if conversation.job == "running" else "the delegated job"
            return Reading(f"asks about {what}", lane="chat", task=said)
    earlier = conversation.last("user")
    if not earlier or len(said.split()) > 25:
        return None
    same = _SAME.match(said.rstrip("?.! "))
    if same and _FORMAT.match(next(g for g in same.groups() if g)):
        # "and in one line?": the answer just given, reshaped; the chat lane has it in its
        # history, and a job would redo the whole work for a summary
        place = _short(next(g for g in same.groups() if g), 4)
        return Reading(f"asks for the last answer in {place}", lane="chat", task=said)
    if same or _REFINES.match(said):
        what = "refines the earlier request"
        if same:
            place = _short(next(g for g in same.groups() if g), 4)
            what = f"asks the same for {place} as the earlier request"
        return Reading(what, inherit=True, ask=earlier, task=said)
    return None


def _offer_task(offer: str, added: str, conversation: Conversation) -> str:
    """A job's text for an accepted offer: the task, what the person added, what they asked."""
    rest = re.sub(r"^(?:and|but|also|plus|just)\s+", "", added)
    task = offer[0].upper() + offer[1:] + (f" ({rest})" if rest else "")
    asked = conversation.last("user")
    return f"{task}.\n\nWhat the person had asked: {asked}" if asked else task


def offered_task(text: str, conversation: Conversation) -> str | None:
    """The job's text when `text`, a yes by the chat model's reading (it called `delegate`),
    answers the last reply's offer: the offered task with the person's addition; None when
    the reply offered nothing or the message is a request of its own."""
    offer = conversation.standing_offer()
    if not offer:
        return None
    said = _plain(text)
    accepted = _acceptance(said)
    if accepted is None and (len(said.split()) > 12 or _REFUSES.match(said)):
        return None
    return _offer_task(offer, said if accepted is None else accepted, conversation)


def handed_off(reply: str) -> bool:
    """Whether a reply is a hand-off notice (the work is the job's, not in the chat)."""
    return bool(_HANDED_OFF.search((reply or "")[-_TAIL:]))


def follow_up_task(earlier_task: str, text: str) -> str:
    """A follow-up's job text: self-contained, the earlier request first."""
    return f"{earlier_task.strip()}\n\nNow, as a follow-up to that: {text.strip()}"


def with_known(conversation: Conversation, **known: object) -> Conversation:
    return replace(conversation, **known)  # type: ignore[arg-type]
