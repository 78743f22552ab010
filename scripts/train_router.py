"""Train the router's classifier head and report how well it generalizes.

    .venv/bin/python scripts/train_router.py [--dev ../shared/routing/dev.jsonl] [--train-only]

Embeds `assistant/data/router_train.jsonl` with MiniLM, picks the ridge strength and the
deep threshold by cross-validation on the training set alone, reports cross-validated and
held-out figures, then fits the shipped head (`assistant/data/router_head.npz`) on the
training set plus the dev set (unless --train-only). Deterministic: same data, same head.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

from assistant.routing.embedder import MiniLM
from assistant.routing.router import Head, embed, load_examples, stratified_folds

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "assistant" / "data"
L2_GRID = (0.03, 0.1, 0.3, 1.0)
THRESHOLD_GRID = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
MIN_DEEP_RECALL = 0.99
"""Missing deep costs more than a slow chat reply: a hard task gets a shallow answer."""


def scores(pred: np.ndarray, deep: np.ndarray) -> tuple[float, float]:
    """(accuracy, deep recall)."""
    return float((pred == deep).mean()), float(pred[deep].mean())


def cross_validate(
    x: np.ndarray,
    deep: np.ndarray,
    *,
    k: int,
    l2: float,
    threshold: float,
    always: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Out-of-fold deep predictions and per-fold scores; `always` joins every training fold."""
    folds = stratified_folds(deep, k)
    pred = np.zeros(len(deep), dtype=bool)
    per_fold = []
    for i in range(k):
        held = folds == i
        xs, ys = x[~held], deep[~held]
        if always is not None:
            xs, ys = np.vstack([xs, always[0]]), np.concatenate([ys, always[1]])
        head = Head.fit(xs, ys, l2=l2, threshold=threshold)
        pred[held] = head.p_deep(x[held]) >= 0.5
        per_fold.append(scores(pred[held], deep[held]))
    return pred, per_fold


def choose(x: np.ndarray, deep: np.ndarray) -> tuple[float, float]:
    """(l2, threshold) with the best CV accuracy among those reaching MIN_DEEP_RECALL."""
    best: tuple[float, float, float] | None = None  # (accuracy, threshold, l2)
    for l2 in L2_GRID:
        for t in THRESHOLD_GRID:
            pred, _ = cross_validate(x, deep, k=10, l2=l2, threshold=t)
            acc, recall = scores(pred, deep)
            print(f"  l2={l2:<5} threshold={t:<5} cv accuracy {acc:.3f} deep recall {recall:.3f}")
            # Ties go to the higher threshold: fewer chat turns sent to the slow lane.
            key = (acc, t, l2)
            if recall >= MIN_DEEP_RECALL and (best is None or key > best):
                best = key
    if best is None:
        raise SystemExit(f"no setting reaches deep recall {MIN_DEEP_RECALL}: add training data")
    return best[2], best[1]


def show(name: str, pred: np.ndarray, deep: np.ndarray, per_fold: list | None = None) -> None:
    acc, recall = scores(pred, deep)
    print(f"{name}: accuracy {acc:.3f}, deep recall {recall:.3f} (n={len(deep)})")
    for i, (a, r) in enumerate(per_fold or []):
        print(f"    fold {i}: accuracy {a:.3f}, deep recall {r:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=Path, default=DATA / "router_train.jsonl")
    ap.add_argument("--dev", type=Path, default=ROOT.parent / "shared" / "routing" / "dev.jsonl")
    ap.add_argument("--train-only", action="store_true", help="fit the shipped head without dev")
    ap.add_argument("--out", type=Path, default=DATA / "router_head.npz")
    args = ap.parse_args(argv)

    encoder = MiniLM.load()
    texts, deep = load_examples(args.train)
    x = embed(encoder, texts)
    print(f"training set: {len(texts)} ({int(deep.sum())} deep)")
    l2, threshold = choose(x, deep)
    print(f"chosen: l2={l2}, threshold={threshold}")
    pred, per_fold = cross_validate(x, deep, k=10, l2=l2, threshold=threshold)
    show("train, 10-fold CV", pred, deep, per_fold)
    fit_x, fit_y = x, deep
    if args.dev.is_file():
        dev_texts, dev_deep = load_examples(args.dev)
        dx = embed(encoder, dev_texts)
        train_only = Head.fit(x, deep, l2=l2, threshold=threshold)
        show("dev, held out (train-only head)", train_only.p_deep(dx) >= 0.5, dev_deep)
        pred, per_fold = cross_validate(
            dx, dev_deep, k=5, l2=l2, threshold=threshold, always=(x, deep)
        )
        show("dev, 5-fold CV (train + other dev folds)", pred, dev_deep, per_fold)
        both_x, both_y = np.vstack([x, dx]), np.concatenate([deep, dev_deep])
        pred, per_fold = cross_validate(both_x, both_y, k=10, l2=l2, threshold=threshold)
        show("train+dev, 10-fold CV", pred, both_y, per_fold)
        if not args.train_only:
            fit_x, fit_y = both_x, both_y
    else:
        print(f"no dev set at {args.dev}: held-out figures skipped", file=sys.stderr)
    head = Head.fit(fit_x, fit_y, l2=l2, threshold=threshold)
    digest = hashlib.sha256(args.train.read_bytes()).hexdigest()[:16]
    head.save(args.out, train_sha256=digest, examples=str(len(fit_y)))
    print(f"wrote {args.out} ({len(fit_y)} examples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
