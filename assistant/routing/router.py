"""Which lane a request goes to (DESIGN.md section 3), first match wins:

1. explicit: the UI's Delegate action, or a cue at the very start ("delegate ...");
2. the conversation (`routing.conversation`): an accepted offer, a follow-up, a question about
   the running job; then the classifier: MiniLM embedding + logistic regression, no engine
   call, a few ms, on the text a conversation rule points at or else the message itself;
3. the chat model's own `delegate` tool: that runs in the turn code; this module only
   supplies the tool schema and the decision it leads to.

The router returns a lane and a reason, nothing else: whatever a request says, it cannot
reach prompts, tools or permissions from here.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from assistant.records import Lane, RouteDecision
from assistant.routing.context import (
    BEFORE_TOKENS,
    REPLY_TOKENS,
    ContextHead,
    Parts,
    Row,
    focus,
    parts,
    row,
)
from assistant.routing.conversation import (
    Conversation,
    Reading,
    follow_up_task,
    handed_off,
    read,
)
from assistant.routing.embedder import Encoder, MiniLM
from assistant.routing.spoken import FILLERS, OPENERS, normalise, strip_fillers

DELEGATE_TOOL: dict = {
    "type": "function",
    "function": {
        "name": "delegate",
        "description": (
            "Hand the user's request to the deep lane, a background job that thinks at length "
            "and reports back when done. Call it for hard multi-step work: writing long "
            "documents or code, reviews and refactors, debugging, research and comparisons, "
            "plans, proofs, data analysis, or whenever the user asks for thoroughness. Do not "
            "call it for greetings, quick facts, short how-tos or follow-ups: answer those "
            "yourself. After calling it, tell the user in one short sentence that the work "
            "was handed off."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "task": {
                    "type": "string",
                    "description": "The complete task, self-contained, in the user's words.",
                }
            },
            "required": ["task"],
        },
    },
}


def decision_from_tool(task: str = "") -> RouteDecision:
    """The decision when the chat model called `delegate` (step 3)."""
    return RouteDecision(lane="deep", reason="model asked to delegate", text=task.strip())


# --- step 1: explicit cues -------------------------------------------------------------

# Politeness and fillers that may come before a cue ("ok, please think hard about ...",
# and as transcribed: "um so like delegate this ..."). No text may match the repeated
# group in two ways, or a long run of fillers that ends in no cue takes exponential time
# to fail: so each alternative must end a word ("ummm" is not "um" + "mm"), "um" is left
# to "um+", and "please" after "can you" is its own alternative.
_HESITATIONS = "|".join(sorted(f for f in FILLERS if not re.fullmatch("um+|uh+", f)))
_LEAD = (
    r"(?:(?:" + OPENERS + "|" + _HESITATIONS + r"|um+|uh+|please|pls|kindly"
    r"|(?:can|could|would|will)\s+you"
    r"|i(?:'d|\s+would)\s+like\s+you\s+to|i\s+(?:want|need)\s+you\s+to)(?![\w'])[\s,.!:;-]*)*"
)
_IT = r"(?:\s+(?:this|that|it)(?:\s+(?:one|task|job))?)?"
# (label shown in the reason, pattern); a cue must be followed by more request text.
_CUES: tuple[tuple[str, str], ...] = (
    ("delegate", r"delegate" + _IT + r"(?:\s+to\s+(?:the\s+)?deep(?:\s+lane)?)?"),
    ("hand this off", r"hand(?:\s+(?:this|that|it))?\s+off" + _IT),
    ("think hard", r"think\s+(?:really\s+|very\s+|long\s+and\s+)?hard(?:\s+about" + _IT + ")?"),
    ("think carefully", r"think\s+carefully(?:\s+about" + _IT + ")?"),
    ("deep mode", r"(?:(?:use|in|switch\s+to)\s+)?deep\s+mode"),
    ("deep dive", r"(?:do\s+a\s+)?deep[\s-]+dive(?:\s+(?:into|on)" + _IT + ")?"),
    ("take your time", r"take\s+your\s+time(?:\s+(?:on|with)" + _IT + r")?(?:\s+and)?"),
)
_CUE_RES = tuple(
    (label, re.compile(r"^\s*" + _LEAD + "(?:" + pattern + r")(?=[\s,.!:;-]|$)", re.IGNORECASE))
    for label, pattern in _CUES
)
_CUE_WINDOW = 200
"""Cues count only at the start: looking no further keeps matching constant-time."""


def match_cue(text: str) -> tuple[str, str] | None:
    """(cue label, request without the cue) when the request starts with a cue."""
    for label, pattern in _CUE_RES:
        m = pattern.match(text, 0, _CUE_WINDOW)
        if m:
            # Hesitation right after the cue ("delegate this um write ...") is no part of the task.
            rest = strip_fillers(text[m.end() :]).strip()
            # A bare "delegate." names no task: let the classifier see the whole text.
            if rest:
                return label, rest
    return None


# --- step 2: the classifier head ---------------------------------------------------------


@dataclass(frozen=True)
class Head:
    """Logistic regression on MiniLM embeddings. The decision threshold is folded into
    the bias, so 0.5 is the cut and the reported probability agrees with the lane."""

    weights: np.ndarray
    bias: float
    l2: float
    """Ridge strength it was trained with; cross-validation retrains with the same."""
    threshold: float
    """The raw P(deep) cut, below 0.5 to favour deep recall; kept for retraining."""

    def p_deep(self, vecs: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(vecs @ self.weights + self.bias)))

    @classmethod
    def load(cls, path: Path | None = None) -> Head:
        """The shipped head (`assistant/data/router_head.npz`) or one at `path`."""
        src = path or resources.files("assistant.data").joinpath("router_head.npz")
        with src.open("rb") as f, np.load(f) as z:
            return cls(
                weights=z["weights"].astype(np.float32),
                bias=float(z["bias"]),
                l2=float(z["l2"]),
                threshold=float(z["threshold"]),
            )


_EARLIER_READ = 1
"""How many earlier requests a follow-up may lead back through ("the same for Rome" after
"now Berlin" after a research request): each costs an encoder pass."""
_TRAILING = re.compile(r"[\s?.!\u2026]+$")
ROUTE_TOKENS = 64
"""Tokens the classifier reads (start and end of long text): every training request fits,
and it bounds a decision on pasted pages to about the cost of a long sentence."""


def embed(encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
    """Classifier features, the same for training and for routing. Transcripts are first
    normalised (fillers, openers, numbers in words: see `spoken`), which leaves typed text
    nearly as it is. Trailing punctuation is dropped: in hand-written training data
    questions end in "?" and tasks in ".", a shortcut that fails on unpunctuated typed or
    transcribed text ("how tall is the eiffel tower" scored deep without this)."""
    return encoder.encode([routed_text(t) for t in texts], max_tokens=ROUTE_TOKENS)


def routed_text(text: str) -> str:
    """What the classifier reads of a request: normalised, without trailing punctuation.
    Training data is compared with held-out sets in this form too, so a spoken line that is
    a typed training line once normalised counts as the same line."""
    return _TRAILING.sub("", normalise(text).strip())


def load_examples(path: Path | None = None) -> tuple[list[str], np.ndarray]:
    """(texts, is_deep) from a JSONL of {"text", "lane"}; default: the shipped training set."""
    src = path or resources.files("assistant.data").joinpath("router_train.jsonl")
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    return [r["text"] for r in rows], np.array([r["lane"] == "deep" for r in rows])


# --- the router --------------------------------------------------------------------------


_RESHAPE = "asks for the last answer in"
"""The one conversation reading kept as a rule: the answer just given, in another shape."""
_CACHED = 512
"""Embeddings kept: a conversation's earlier requests and replies were embedded when they
were routed, so a turn usually embeds only its own message and the reply before it."""


class Router:
    """Decides the lane of one request: explicit cue first, then the conversation's
    classifier (`routing.context`) when turns came before it, else the message's."""

    def __init__(self, encoder: Encoder, head: Head, context: ContextHead | None = None) -> None:
        self.encoder = encoder
        self.head = head
        self.context = context
        self._cache: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def vectors(self, texts: Sequence[str], caps: Sequence[int]) -> np.ndarray:
        """Embeddings of already routed texts (see `routed_text`), each read to its token
        cap, from the cache where they are; one encoder pass for the rest. Empty: zeros."""
        out = np.zeros((len(texts), len(self.head.weights)), dtype=np.float32)
        missing: list[int] = []
        with self._lock:
            for i, key in enumerate(zip(texts, caps, strict=True)):
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    out[i] = hit
                elif key[0]:
                    missing.append(i)
        if missing:
            got = self.encoder.encode(
                [texts[i] for i in missing], max_tokens=[caps[i] for i in missing]
            )
            with self._lock:
                for i, row in zip(missing, got, strict=True):
                    out[i] = row
                    self._cache[(texts[i], caps[i])] = row
                while len(self._cache) > _CACHED:
                    self._cache.popitem(last=False)
        return out

    @classmethod
    def load(cls, head_path: Path | None = None, model_dir: Path | None = None) -> Router:
        """The router with the shipped head and the installed encoder, built once."""
        return _load(head_path, model_dir)

    def warm(self) -> Router:
        """Run one decision so the first real one pays no first-call costs."""
        self.decide("warming up the router")
        return self

    def decide(
        self, text: str, *, explicit: bool = False, conversation: Conversation | None = None
    ) -> RouteDecision:
        """The lane of `text`, read with the `conversation` before it when there is one."""
        start = time.perf_counter()
        lane, reason, rest = self._decide((text or "").strip(), explicit, conversation)
        ms = (time.perf_counter() - start) * 1000.0
        return RouteDecision(lane=lane, reason=reason, ms=ms, text=rest)

    def decide_many(
        self, texts: Sequence[str], conversations: Sequence[Conversation | None] | None = None
    ) -> list[RouteDecision]:
        """`decide` for several requests at once, each decided as `decide` decides it (same
        lane, reason and text): one encoder pass for all the message classifier reads alone
        (`routing.batch` gathers the requests of concurrent turns); a request with turns
        before it is read with them, on its own (issue 50: read here by the issue-30 rules
        only, the page's and `/v1`'s turns missed the conversation classifier)."""
        start = time.perf_counter()
        texts = [(t or "").strip() for t in texts]
        convs = list(conversations or [None] * len(texts))
        found = [self._explicit(t, False) for t in texts]
        for i, (t, conv) in enumerate(zip(texts, convs, strict=True)):
            if found[i] is None and conv is not None and conv.turns:
                found[i] = self._decide(t, False, conv)
        need = [i for i, f in enumerate(found) if f is None]
        if need:
            p = self.classify([texts[i] for i in need])
            for i, p_deep in zip(need, p, strict=True):
                found[i] = self._classified(float(p_deep), texts[i])
        ms = (time.perf_counter() - start) * 1000.0
        return [RouteDecision(lane=f[0], reason=f[1], ms=ms, text=f[2]) for f in found]  # type: ignore[index]

    def classify(self, texts: Sequence[str]) -> np.ndarray:
        """P(deep) per text, the classifier alone (no cues)."""
        return self.head.p_deep(embed(self.encoder, texts))

    def _p_single(self, text: str) -> float:
        """P(deep) of one text by the single-message head, embedded through the cache."""
        return float(self.head.p_deep(self.vectors([routed_text(text)], [ROUTE_TOKENS]))[0])

    def remember(self, reply: str) -> None:
        """Embed a reply as the next decisions read it (the last reply, then the one before),
        when it is written and off the decision path: a turn then embeds only its message
        (issue 50, item 4). Best effort: a failure here only costs the next decision time."""
        seen = routed_text(focus(reply))
        if seen:
            with contextlib.suppress(Exception):
                self.vectors([seen, seen], [REPLY_TOKENS, BEFORE_TOKENS])

    def context_row(self, p: Parts) -> Row:
        """What the conversation classifier reads of `p` (see `routing.context`)."""
        texts = p.texts()
        vecs = self.vectors([routed_text(t) for t, _ in texts], [c for _, c in texts])
        logits = vecs @ self.head.weights + self.head.bias
        return row(vecs, logits, p)

    def _decide(
        self, text: str, explicit: bool, conversation: Conversation | None, depth: int = 0
    ) -> tuple[Lane, str, str]:
        found = self._explicit(text, explicit)
        if found is not None:
            return found
        if self.context is not None and conversation is not None and conversation.turns:
            return self._in_context(text, conversation)
        reading = read(text, conversation) if depth <= _EARLIER_READ else None
        if reading is not None:
            return self._by_reading(reading, text, conversation, depth)  # type: ignore[arg-type]
        return self._classified(float(self.classify([text])[0]), text)

    def _by_reading(
        self, reading: Reading, text: str, conversation: Conversation, depth: int = 0
    ) -> tuple[Lane, str, str]:
        """The decision a conversation rule leads to: its own lane, the earlier request's, or
        the classifier's on the text the rule names (the offered task)."""
        if reading.lane is not None:
            return reading.lane, reading.reason, text
        if reading.inherit:
            if conversation.last_lane is not None:
                lane, why = conversation.last_lane, f"{conversation.last_lane} lane"
                earlier = conversation.last_task or reading.ask
            else:  # a client's history: the earlier request is routed again, in its context
                before = conversation.before_last_request()
                lane, why, earlier = self._decide(reading.ask, False, before, depth + 1)
            task = follow_up_task(earlier, text) if lane == "deep" else text
            return lane, f"{reading.reason} ({why})", task
        lane, why, _ = self._classified(float(self.classify([reading.ask])[0]), reading.ask)
        return lane, f"{reading.reason} ({why})", reading.task if lane == "deep" else text

    def _in_context(self, text: str, conversation: Conversation) -> tuple[Lane, str, str]:
        """The conversation classifier's decision; the rules' reading names what it saw and
        gives the job its text. One rule stays a rule: a follow-up ("the same for Berlin",
        "make it shorter") to a request whose lane is stored goes that lane."""
        p = parts(text, conversation)
        reading = p.reading
        if reading is not None and reading.inherit and conversation.last_lane is not None:
            return self._by_reading(reading, text, conversation)
        if (
            reading is not None
            and reading.reason.startswith(_RESHAPE)
            and not handed_off(conversation.last("assistant"))
        ):  # "and in one line?" after the answer itself: the chat lane has it in its history
            return "chat", reading.reason, text
        p_deep, act = self.context.decide(self.context_row(p))  # type: ignore[union-attr]
        lane: Lane = "deep" if p_deep >= 0.5 else "chat"
        score = f"conversation {max(p_deep, 1 - p_deep):.2f}"
        said = (reading.lane or lane) if reading is not None else None
        if reading is not None and said == lane:
            why = f"{reading.reason} ({score})"
        else:
            why = f"{act} ({score})"
        if lane == "chat":
            return lane, why, text
        return lane, why, self._context_task(text, conversation, reading)

    def _context_task(self, text: str, conversation: Conversation, reading: Reading | None) -> str:
        """What a deep job is asked, self-contained: the accepted offer, the earlier request
        with its follow-up, or the message itself when it stands alone."""
        if reading is not None and reading.task and reading.lane is None and not reading.inherit:
            return reading.task  # an accepted offer, with what the person had asked
        earlier = [t for r, t in reversed(conversation.turns) if r == "user"]
        alone = self._p_single(text) >= 0.5 if len(text.split()) >= 4 else False
        if alone or not earlier:
            return text
        offer = conversation.standing_offer()
        if offer:
            task = f"{offer[0].upper() + offer[1:]} ({text})"
            return f"{task}.\n\nWhat the person had asked: {earlier[0]}"
        if reading is not None and reading.inherit:
            return follow_up_task(conversation.last_task or reading.ask, text)
        # the earlier request this answers or follows: the hardest of the last two
        asked = earlier[:2]
        task = max(asked, key=self._p_single)
        last = conversation.turns[-1]
        said = f"\n\nThe assistant then said: {last[1].strip()}" if last[0] == "assistant" else ""
        return f"{task.strip()}{said}\n\nThe person replied: {text.strip()}"

    @staticmethod
    def _explicit(text: str, explicit: bool) -> tuple[Lane, str, str] | None:
        """The decision when no classifier is needed (step 1, or nothing to classify)."""
        cue = match_cue(text)
        if explicit:
            return "deep", "explicit: Delegate action", cue[1] if cue else text
        if cue:
            return "deep", f"cue: '{cue[0]}'", cue[1]
        if not text:
            return "chat", "empty request", ""
        return None

    @staticmethod
    def _classified(p: float, text: str) -> tuple[Lane, str, str]:
        lane: Lane = "deep" if p >= 0.5 else "chat"
        return lane, f"classifier {max(p, 1 - p):.2f}", text


@lru_cache(maxsize=4)
def _load(head_path: Path | None, model_dir: Path | None) -> Router:
    return Router(MiniLM.load(model_dir), Head.load(head_path), ContextHead.load())
