"""Route the typed and spoken dev sets and the spoken evaluation set; print accuracy and deep
recall side by side, each with its n.

    .venv/bin/python scripts/eval_router.py [--typed ../shared/routing/dev.jsonl]
        [--spoken assistant/routing/spoken_dev.jsonl]
        [--eval assistant/routing/spoken_eval.jsonl]
        [--conversations assistant/routing/conversation_dev.jsonl] [--errors] [--json]

Two routers are scored, both through `Router.decide` (cues first, then the classifier):
- shipped: the head in `assistant/data/router_head.npz`, fitted on the training sets alone
  (unless it was trained --with-dev: its meta names the files, see train_router.py);
- held out: a head fitted the same way on the training sets alone, so no evaluated line has
  been seen, whatever the shipped head was fitted on.
Spoken requests route as well as typed ones when, for each router, the spoken accuracy and
deep recall are at least the typed ones. The spoken evaluation set is the one written by
other rules than the normaliser's (different fillers, run-on questions, one-word answers).

The multi-turn set (issue 30) is routed twice by the shipped router: with the turns before
each last message, as an OpenAI client sends them (no stored lane, no recorded offer: the
offer is read from the reply's text), and on the last message alone, as before the issue.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from assistant.routing.conversation import Conversation
from assistant.routing.router import Router, embed, load_examples

try:
    from scripts.train_router import SPOKEN_DEV, SPOKEN_EVAL, TYPED_DEV, fit_head, training_set
except ModuleNotFoundError:  # run as a file, so scripts/ itself is on the path
    from train_router import (  # type: ignore
        SPOKEN_DEV,
        SPOKEN_EVAL,
        TYPED_DEV,
        fit_head,
        training_set,
    )


@dataclass(frozen=True)
class Score:
    accuracy: float
    deep_recall: float
    n: int
    by_cue: int
    """Requests decided by an explicit cue rather than the classifier."""
    misses: list[dict]
    """{"text", "lane" (the right one), "reason"} per misrouted request."""


def score(router: Router, texts: Sequence[str], deep: np.ndarray) -> Score:
    """Accuracy and deep recall of the full routing decision on labelled requests."""
    decisions = [router.decide(t) for t in texts]
    pred = np.array([d.lane == "deep" for d in decisions])
    misses = [
        {"text": t, "lane": "deep" if y else "chat", "reason": d.reason}
        for t, y, d, p in zip(texts, deep, decisions, pred, strict=True)
        if p != y
    ]
    return Score(
        accuracy=float((pred == deep).mean()),
        deep_recall=float(pred[deep].mean()),
        n=len(texts),
        by_cue=sum(d.reason.startswith("cue") for d in decisions),
        misses=misses,
    )


CONVERSATIONS = Path(__file__).resolve().parents[1] / "assistant/routing/conversation_dev.jsonl"


def load_conversations(path: Path = CONVERSATIONS) -> list[dict]:
    """The multi-turn cases: {"turns": [[role, text]...], "job", "text", "lane", "rule"}."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def conversation_of(case: dict) -> Conversation:
    return Conversation(turns=tuple((r, t) for r, t in case["turns"]), job=case.get("job"))


def score_conversations(router: Router, cases: Sequence[dict], *, read: bool = True) -> Score:
    """The full decision on each case's last message, with its conversation (`read`) or alone."""
    decisions = [
        router.decide(c["text"], conversation=conversation_of(c) if read else None) for c in cases
    ]
    pred = np.array([d.lane == "deep" for d in decisions])
    deep = np.array([c["lane"] == "deep" for c in cases])
    misses = [
        {"text": c["text"], "lane": c["lane"], "reason": d.reason, "rule": kind_of(c)}
        for c, d, p, y in zip(cases, decisions, pred, deep, strict=True)
        if p != y
    ]
    return Score(
        accuracy=float((pred == deep).mean()),
        deep_recall=float(pred[deep].mean()),
        n=len(cases),
        by_cue=sum(d.reason.startswith("cue") for d in decisions),
        misses=misses,
    )


def kind_of(case: dict) -> str:
    """A case's group: "rule" in the project's set, "kind" in the blind sets."""
    return str(case.get("rule") or case.get("kind") or "")


def by_kind(router: Router, cases: Sequence[dict]) -> dict[str, tuple[int, int]]:
    """{kind: (right, cases)} of the full decision with each case's conversation."""
    out: dict[str, list[int]] = {}
    for c in cases:
        d = router.decide(c["text"], conversation=conversation_of(c))
        tally = out.setdefault(kind_of(c), [0, 0])
        tally[0] += d.lane == c["lane"]
        tally[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def held_out_router(router: Router) -> Router:
    """The shipped router with its head refitted on the training sets only (same ridge
    strength and threshold), so no dev line has been seen."""
    texts, deep = training_set()
    head = fit_head(
        embed(router.encoder, texts), deep, l2=router.head.l2, threshold=router.head.threshold
    )
    return Router(router.encoder, head)


def evaluate(
    typed: Path = TYPED_DEV,
    spoken: Path = SPOKEN_DEV,
    spoken_eval: Path = SPOKEN_EVAL,
    *,
    held_out: bool = True,
) -> dict[str, dict[str, Score]]:
    """{router name: {"typed": Score, "spoken": Score, "spoken eval": Score}}."""
    shipped = Router.load().warm()
    routers = {"shipped": shipped}
    if held_out:
        routers["held out"] = held_out_router(shipped)
    sets = {
        "typed": load_examples(typed),
        "spoken": load_examples(spoken),
        "spoken eval": load_examples(spoken_eval),
    }
    return {name: {kind: score(r, *sets[kind]) for kind in sets} for name, r in routers.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--typed", type=Path, default=TYPED_DEV)
    ap.add_argument("--spoken", type=Path, default=SPOKEN_DEV)
    ap.add_argument("--eval", type=Path, default=SPOKEN_EVAL)
    ap.add_argument("--conversations", type=Path, default=CONVERSATIONS)
    ap.add_argument(
        "--blind",
        type=Path,
        action="append",
        default=[],
        help="a conversation set written by someone else (kind, turns, job, text, lane); "
        "scored alone, with its figures per kind",
    )
    ap.add_argument("--errors", action="store_true", help="list the misrouted requests")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    for path in (args.typed, args.spoken, args.eval):
        if not path.is_file():
            print(f"error: no dev set at {path}", file=sys.stderr)
            return 1

    if args.blind:
        return score_blind(args.blind, errors=args.errors, as_json=args.json)
    results = evaluate(args.typed, args.spoken, args.eval)
    cases = load_conversations(args.conversations)
    shipped = Router.load()
    results["shipped"]["multi-turn"] = score_conversations(shipped, cases)
    results["shipped"]["last msg only"] = score_conversations(shipped, cases, read=False)
    if args.json:
        print(json.dumps({k: {s: asdict(v) for s, v in r.items()} for k, r in results.items()}))
        return 0
    print(f"{'router':<10} {'set':<13} {'n':>4} {'accuracy':>9} {'deep recall':>12} {'by cue':>7}")
    for name, sets in results.items():
        for kind, s in sets.items():
            print(
                f"{name:<10} {kind:<13} {s.n:>4} {s.accuracy:>9.3f} {s.deep_recall:>12.3f}"
                f" {s.by_cue:>7}"
            )
            for m in s.misses if args.errors else ():
                print(f"    should be {m['lane']} ({m['reason']}): {m['text']}")
    return 0


def decision_ms(router: Router, cases: Sequence[dict]) -> dict[str, float]:
    """Decision time (ms, p50 and p95) on each case's last message, no engine call:
    - cold: nothing of the conversation embedded before (a client's history seen first);
    - in a conversation: its earlier request was routed first, as the app routes every turn,
      so only the new message and the reply before it are embedded;
    - replies remembered: as in a conversation, and each reply since that request embedded
      when it was written (`Router.remember`, as the app does off the decision path), so
      only the message is."""
    cold, warm, written = [], [], []
    for c in cases:
        conv = conversation_of(c)
        router._cache.clear()
        cold.append(router.decide(c["text"], conversation=conv).ms)
        for out, remember in ((warm, False), (written, True)):
            router._cache.clear()
            users = [i for i, (r, _) in enumerate(conv.turns) if r == "user"]
            if users:
                i = users[-1]
                before = Conversation(turns=conv.turns[:i], job=conv.job)
                router.decide(conv.turns[i][1], conversation=before)
                for _, reply in conv.turns[i + 1 :] if remember else ():
                    router.remember(reply)
            out.append(router.decide(c["text"], conversation=conv).ms)
    pct = lambda xs, q: float(np.percentile(xs, q))  # noqa: E731
    return {
        "cold p50": pct(cold, 50),
        "cold p95": pct(cold, 95),
        "in a conversation p50": pct(warm, 50),
        "in a conversation p95": pct(warm, 95),
        "replies remembered p50": pct(written, 50),
        "replies remembered p95": pct(written, 95),
    }


def score_blind(paths: Sequence[Path], *, errors: bool = False, as_json: bool = False) -> int:
    """Accuracy, deep recall and n of the shipped router on each blind set, and per kind."""
    router = Router.load().warm()
    out = {}
    for path in paths:
        cases = load_conversations(path)
        s = score_conversations(router, cases)
        kinds = by_kind(router, cases)
        ms = decision_ms(router, cases)
        out[str(path)] = {"score": asdict(s), "by_kind": kinds, "ms": ms}
        if as_json:
            continue
        print(f"{path}: n={s.n} accuracy {s.accuracy:.3f} deep recall {s.deep_recall:.3f}")
        print("    decision ms: " + ", ".join(f"{k} {v:.1f}" for k, v in ms.items()))
        for kind, (right, n) in kinds.items():
            print(f"    {right:>3}/{n:<3} {kind}")
        for m in s.misses if errors else ():
            print(f"    should be {m['lane']} ({m['reason']}) [{m['rule']}]: {m['text']}")
    if as_json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
