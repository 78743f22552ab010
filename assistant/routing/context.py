"""The lane of a message read with the conversation before it, learned (issue 37).

Rules that match the rules that wrote their data do not generalise: offers come in more
phrasings than a pattern list holds, and so do yeses, conditions, declines and follow-ups.
So the last exchange is embedded with the router's MiniLM and a small network decides:

- the message itself (`user`), as the single-message classifier reads it;
- the assistant's last reply (`reply`): its sentences that offer, ask or propose, and its last;
- the reply before it (`before`): an offer followed by a side question lives there;
- the earlier requests (the last two user messages before this one): a follow-up or a
  clarifying answer completes one of them; the one the single-message head finds hardest
  (`earlier`) is embedded with them;
- facts: the single-message head's logit on each of those, the conversation's job (running,
  done, failed), a hand-off notice, the stored lane of the last request, and what the
  conversation rules (`routing.conversation`) read, as hints, not as decisions.

Features are products as well as the vectors (message x reply, message x earlier request),
so "yes" after a large offer, "yes" after a small one and "no thanks" after either embed
apart. Trained by `scripts/train_router.py` on `assistant/data/router_conversations.jsonl`.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from assistant.routing.conversation import Conversation, Reading, read

MESSAGE_TOKENS = 64
"""Tokens read of a request: the router's ROUTE_TOKENS (the message classifier reads the
same vectors; tests/test_router_context.py checks they agree)."""
REPLY_TOKENS = 48
"""Tokens read of the last reply's offering sentences (start and end kept)."""
BEFORE_TOKENS = 32
EARLIER_READ = 2
"""Earlier requests read: the one the reply answered and the one before it."""

_SENTENCES = re.compile(r"[^.?!\n]+(?:[.?!]+|$)")
_MARKS = re.compile(
    r"\bI\s*(?:can|could|'ll|will|'d|would|am\s+happy|'m\s+happy|'m\s+glad)\b|\b(?:shall|should)\s+I\b"
    r"|\bwant\s+me\b|\bwould\s+you\s+like\b|\bdo\s+you\s+want\b|\bhappy\s+to\b|\bglad\s+to\b"
    r"|\blet\s+me\b|\beither\b|\boption\b|\bwhich\b|\bprefer\b|\binterested\b|\bif\s+you\b"
    r"|\bsay\s+the\s+word\b|\bnext\s+step\b|\?",
    re.IGNORECASE,
)
_NOTICE = re.compile(
    r"\bjob\b|\bbackground\b|\bdeep\s+lane\b|\bhanded\b|\bqueued\b|\bunderway\b|\bon\s+it\b"
    r"|\bis\s+ready\b|\bfinished\b|\bcomplete\b",
    re.IGNORECASE,
)
_KINDS = ("accepts", "declines", "asks about", "asks the same", "refines", "asks for the last")
N_FACTS = 19 + len(_KINDS)


def focus(reply: str) -> str:
    """What of a reply the network reads: its sentences that offer, propose or ask (the last
    two of them) and its last sentence, in order."""
    found = [s.strip() for s in _SENTENCES.findall(reply or "") if s.strip()]
    if not found:
        return ""
    marked = [i for i, s in enumerate(found) if _MARKS.search(s)][-2:]
    keep = sorted(set(marked) | {len(found) - 1})
    return " ".join(found[i] for i in keep)


@dataclass(frozen=True)
class Parts:
    """The texts a decision embeds and what the conversation says without embedding."""

    user: str
    reply: str
    before: str
    earlier: tuple[str, ...]
    """The earlier requests, most recent first (at most EARLIER_READ)."""
    conversation: Conversation
    reading: Reading | None

    def texts(self) -> list[tuple[str, int]]:
        """(text, token cap) per text to embed, `user` first."""
        out = [
            (self.user, MESSAGE_TOKENS),
            (self.reply, REPLY_TOKENS),
            (self.before, BEFORE_TOKENS),
        ]
        return out + [(t, MESSAGE_TOKENS) for t in self.earlier]


def parts(text: str, conversation: Conversation) -> Parts:
    turns = conversation.turns
    replies = [t for r, t in turns if r == "assistant"]
    asked = [t for r, t in reversed(turns) if r == "user"][:EARLIER_READ]
    last_is_reply = bool(turns) and turns[-1][0] == "assistant"
    reply = focus(replies[-1]) if replies and last_is_reply else ""
    before = focus(replies[-2]) if len(replies) >= 2 else ""
    return Parts(text, reply, before, tuple(asked), conversation, read(text, conversation))


def facts(p: Parts, logit: Callable[[int], float]) -> np.ndarray:
    """The scalar features; `logit(i)`: the single-message head's logit of text i."""
    c = p.conversation
    replies = [t for r, t in c.turns if r == "assistant"]
    n_earlier = len(p.earlier)
    earlier = [logit(3 + i) for i in range(n_earlier)] + [0.0] * (EARLIER_READ - n_earlier)
    reason = p.reading.reason if p.reading is not None else ""
    kinds = [float(reason.startswith(k)) for k in _KINDS]
    last = replies[-1] if replies else ""
    f = [
        logit(0) / 4,
        logit(1) / 4 if p.reply else 0.0,
        logit(2) / 4 if p.before else 0.0,
        earlier[0] / 4,
        earlier[1] / 4,
        max(earlier[:n_earlier], default=0.0) / 4,
        float(n_earlier > 0),
        float(c.job == "running"),
        float(c.job == "done"),
        float(c.job == "failed"),
        # a job's notice in the last reply; not when the app knows that reply answered on the
        # chat lane ("The answer is ready." is then an answer, not a job's notice)
        float(bool(_NOTICE.search(last[-300:])) and c.last_lane != "chat"),
        float(any(_NOTICE.search(t[-300:]) for t in replies[:-1])),
        float(c.last_lane == "deep"),
        float(c.last_lane == "chat"),
        float(c.standing_offer() is not None),
        min(len(p.user.split()), 30) / 10,
        float("?" in p.user),
        min(len(c.turns), 8) / 8,
        float(last.rstrip().endswith("?")),
        *kinds,
    ]
    return np.array(f, dtype=np.float32)


HASHED = 4096
"""Buckets of the hashed words, word pairs and letter triples a message or reply is read as,
beside its embedding: a sentence embedding hears what a message is about better than
whether it says yes ("that works" and "got it" embed alike), which its words tell."""
_WORD = re.compile(r"[a-z0-9']+|[^\sa-z0-9']", re.IGNORECASE)


def lexical(text: str) -> np.ndarray:
    """Hashed counts (scaled to unit length) of `text`'s words, word pairs and the letter
    triples of its words, so "yse" and "goood" share most of theirs with "yes" and "good"."""
    words = [w.lower() for w in _WORD.findall(text or "")][:80]
    grams = [f"w:{w}" for w in words] + [f"p:{a} {b}" for a, b in itertools.pairwise(words)]
    grams += [f"c:{w[i : i + 3]}" for w in (f"<{w}>" for w in words) for i in range(len(w) - 2)]
    grams += ["start:" + (words[0] if words else ""), "end:" + (words[-1] if words else "")]
    out = np.zeros(HASHED, dtype=np.float32)
    for g in grams:
        out[zlib.crc32(g.encode()) % HASHED] += 1.0
    norm = float(np.linalg.norm(out))
    return out / norm if norm else out


ACTS = (
    "accept",
    "decline",
    "acknowledge",
    "ask about the offer",
    "pick big",
    "pick small",
    "pick first",
    "pick second",
    "job status",
    "new request",
    "follow-up",
    "reshape",
    "expand",
    "answer a question",
)
"""What a last message does, as the act classifier reads it from the message alone."""
_SCALE = ("reply", "before", "earlier", "message")


@dataclass(frozen=True)
class Row:
    """What one decision computed: the message's vector and the dense facts around it."""

    user: np.ndarray
    """The message's vector and hashed words, side by side."""
    reply: np.ndarray
    """The last reply's vector (zeros: none), and the one before's."""
    before: np.ndarray
    facts: np.ndarray
    sizes: np.ndarray
    """Single-message logits / 4 of the reply, the reply before, the hardest earlier
    request and the message (`_SCALE`), 0 for a missing one."""


def row(vecs: np.ndarray, logits: np.ndarray, p: Parts) -> Row:
    """The `Row` of `p` from the embeddings of `p.texts()` (in that order) and their
    single-message logits."""
    f = facts(p, lambda i: float(logits[i]))
    n = len(p.earlier)
    hardest = float(logits[3 : 3 + n].max()) if n else 0.0
    u = vecs[0]
    sims = [
        float(u @ vecs[1]) if p.reply else 0.0,
        float(u @ vecs[3 + int(np.argmax(logits[3 : 3 + n]))]) if n else 0.0,
    ]
    sizes = np.array(
        [
            logits[1] / 4 if p.reply else 0.0,
            logits[2] / 4 if p.before else 0.0,
            hardest / 4,
            logits[0] / 4,
        ],
        dtype=np.float32,
    )
    zero = np.zeros(len(u) + HASHED, dtype=np.float32)
    return Row(
        np.concatenate([u, lexical(p.user)]),
        np.concatenate([vecs[1], lexical(p.reply)]) if p.reply else zero,
        np.concatenate([vecs[2], lexical(p.before)]) if p.before else zero,
        np.concatenate([f, np.array(sims, dtype=np.float32)]),
        sizes,
    )


OFFERS = ("none", "small", "big")
"""What a reply offers, as the offer classifier reads it from the reply's vector."""


def dense(acts: np.ndarray, offered: np.ndarray, r: Row) -> np.ndarray:
    """The network's input: the act probabilities, what the last two replies offer, the
    facts, and each act with each size, offer, job fact and whether the reply asks (a yes
    is deep by the offer's size; a follow-up by the earlier request's; a status question by
    the job's; an answer by the question it answers)."""
    job = r.facts[[7, 8, 9, 10, 11, 14, 18]]  # running, done, failed, notice in the last
    # reply, notice before, an offer the rules found, the last reply asks
    sizes = np.concatenate([r.sizes, offered[0, 1:], offered[1, 1:]])
    return np.concatenate(
        [acts, offered.ravel(), r.facts, sizes, np.outer(acts, sizes).ravel(),
         np.outer(acts, job).ravel()]
    ).astype(np.float32)  # fmt: skip


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def fit_acts(
    u: np.ndarray, acts: np.ndarray, *, l2: float = 1e-3, epochs: int = 300, k: int = len(ACTS)
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression of a class (the act; what a reply offers) on a vector
    (full-batch Adam, classes balanced): (weights, bias)."""
    n, d = u.shape
    y = np.zeros((n, k), np.float32)
    y[np.arange(n), acts] = 1.0
    counts = y.sum(0) + 1.0
    sw = (n / (k * counts))[acts].astype(np.float32)
    w = np.zeros((d, k), np.float32)
    b = np.zeros(k, np.float32)
    mw, vw, mb, vb = (np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b))
    for t in range(1, epochs + 1):
        p = softmax(u @ w + b)
        g = (p - y) * sw[:, None] / n
        gw, gb = u.T @ g + l2 * w, g.sum(0)
        for q, gq, m, v in ((w, gw, mw, vw), (b, gb, mb, vb)):
            m *= 0.9
            m += 0.1 * gq
            v *= 0.999
            v += 0.001 * gq * gq
            q -= 0.02 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w, b


@dataclass(frozen=True)
class ContextHead:
    """The act classifier, then a one-hidden-layer network on `dense`; the deep cut is
    folded into the bias, so 0.5 is the cut, as for the single-message head."""

    act_w: np.ndarray
    act_b: np.ndarray
    offer_w: np.ndarray
    offer_b: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: float
    mean: np.ndarray
    scale: np.ndarray
    threshold: float

    def acts(self, u: np.ndarray) -> np.ndarray:
        return softmax(np.atleast_2d(u) @ self.act_w + self.act_b)

    def p_from_dense(self, x: np.ndarray) -> np.ndarray:
        """P(deep): the mean logit of the networks (one per seed: `w1` is (nets, d, hidden))."""
        z = (np.atleast_2d(x) - self.mean) / self.scale
        w1 = self.w1 if self.w1.ndim == 3 else self.w1[None]
        b1, w2 = np.atleast_2d(self.b1), np.atleast_2d(self.w2)
        logit = np.mean(
            [np.maximum(z @ w1[e] + b1[e], 0.0) @ w2[e] for e in range(len(w1))], axis=0
        )
        return 1.0 / (1.0 + np.exp(-(logit + self.b2)))

    def offered(self, replies: np.ndarray) -> np.ndarray:
        """P(none, small, big) per reply vector; a missing reply (zeros) offers none."""
        p = softmax(np.atleast_2d(replies) @ self.offer_w + self.offer_b)
        p[~np.atleast_2d(replies).any(axis=1)] = (1.0, 0.0, 0.0)
        return p

    def decide(self, r: Row) -> tuple[float, str]:
        """(P(deep), the message's likeliest act)."""
        acts = self.acts(r.user)[0]
        offered = self.offered(np.vstack([r.reply, r.before]))
        return float(self.p_from_dense(dense(acts, offered, r))[0]), ACTS[int(np.argmax(acts))]

    @classmethod
    def load(cls, path: Path | None = None) -> ContextHead | None:
        """The shipped head (`assistant/data/router_context.npz`), or None when there is none."""
        src = path or resources.files("assistant.data").joinpath("router_context.npz")
        if not src.is_file():
            return None
        with src.open("rb") as f, np.load(f) as z:
            if "act_w" not in z:
                return None
            return cls(
                **{
                    k: z[k].astype(np.float32)
                    for k in ("act_w", "act_b", "offer_w", "offer_b", "w1", "b1", "w2")
                },
                b2=float(z["b2"]),
                mean=z["mean"].astype(np.float32),
                scale=z["scale"].astype(np.float32),
                threshold=float(z["threshold"]),
            )

    def save(self, path: Path, meta: str = "{}") -> None:
        np.savez(path, **{k: getattr(self, k) for k in self.__dataclass_fields__}, meta=meta)


def fit(
    x: np.ndarray,
    deep: np.ndarray,
    *,
    hidden: int = 32,
    l2: float = 1e-3,
    epochs: int = 60,
    threshold: float = 0.5,
    seed: int = 0,
) -> tuple[np.ndarray, ...]:
    """The network on dense rows `x`: class-balanced logistic loss, Adam on mini-batches,
    deterministic for a seed. (w1, b1, w2, b2, mean, scale), the cut folded into b2."""
    rng = np.random.default_rng(seed)
    mean = x.mean(0)
    scale = x.std(0) + 1e-2
    z = ((x - mean) / scale).astype(np.float32)
    y = deep.astype(np.float32)
    n, d = z.shape
    n_deep = max(float(y.sum()), 1.0)
    sw = np.where(y == 1, n / (2 * n_deep), n / (2 * max(n - n_deep, 1.0))).astype(np.float32)
    params = [
        (rng.standard_normal((d, hidden)) * np.sqrt(2.0 / d)).astype(np.float32),
        np.zeros(hidden, np.float32),
        (rng.standard_normal(hidden) * np.sqrt(1.0 / hidden)).astype(np.float32),
        np.zeros(1, np.float32),
    ]
    m = [np.zeros_like(q) for q in params]
    v = [np.zeros_like(q) for q in params]
    step = 0
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, 64):
            i = order[start : start + 64]
            zb, yb, wb = z[i], y[i], sw[i]
            pre = zb @ params[0] + params[1]
            h = np.maximum(pre, 0.0)
            out = 1.0 / (1.0 + np.exp(-(h @ params[2] + params[3][0])))
            g = (out - yb) * wb / len(i)
            back = np.outer(g, params[2]) * (pre > 0)
            grads = [zb.T @ back + l2 * params[0], back.sum(0), h.T @ g + l2 * params[2],
                     np.array([g.sum()])]  # fmt: skip
            step += 1
            for k, (q, gq) in enumerate(zip(params, grads, strict=True)):
                m[k] = 0.9 * m[k] + 0.1 * gq
                v[k] = 0.999 * v[k] + 0.001 * gq * gq
                q -= (
                    1e-3 * (m[k] / (1 - 0.9**step)) / (np.sqrt(v[k] / (1 - 0.999**step)) + 1e-8)
                ).astype(np.float32)
    shift = float(np.log(threshold / (1 - threshold)))
    return params[0], params[1], params[2], float(params[3][0]) - shift, mean, scale
