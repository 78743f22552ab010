"""Routing decisions of concurrent turns batched into one encoder pass: the same decisions as
one at a time, fewer passes, and a stopped turn or a failing pass breaks no other turn."""

from __future__ import annotations

import asyncio

import pytest

from assistant.records import RouteDecision
from assistant.routing.batch import RouteBatcher

TEXTS = [
    "What is the capital of France?",
    "Write a detailed design document for a distributed job queue with leases and retries.",
    "delegate: compare three sorting algorithms",
    "",
    "thanks!",
    "Refactor this module into smaller pieces and add tests for each of them.",
]


class CountingRouter:
    """Decides by length; counts the passes and the texts in each."""

    def __init__(self, fail: bool = False) -> None:
        self.passes: list[int] = []
        self.fail = fail

    def decide(self, text: str, *, explicit: bool = False) -> RouteDecision:
        return RouteDecision("deep" if explicit or len(text) > 40 else "chat", "len", text=text)

    def decide_many(self, texts: list[str]) -> list[RouteDecision]:
        self.passes.append(len(texts))
        if self.fail:
            raise RuntimeError("encoder broke")
        return [self.decide(t) for t in texts]


async def test_concurrent_decisions_share_passes_and_match_one_at_a_time() -> None:
    router, batcher = CountingRouter(), RouteBatcher()
    decisions = await asyncio.gather(*(batcher.decide(router, t) for t in TEXTS * 5))
    assert [d.lane for d in decisions] == [router.decide(t).lane for t in TEXTS * 5]
    assert sum(router.passes) == len(TEXTS) * 5 and len(router.passes) < len(TEXTS) * 5
    assert max(router.passes) <= batcher.max_batch
    assert not batcher._tasks  # every pass ended with the work
    # alone: a pass of its own, started at once
    router.passes.clear()
    assert (await batcher.decide(router, "hi")).lane == "chat" and router.passes == [1]
    # explicit needs no pass
    assert (await batcher.decide(router, "hi", explicit=True)).lane == "deep"
    assert router.passes == [1]


async def test_a_stopped_turn_and_a_failing_pass_break_no_other_turn() -> None:
    router, batcher = CountingRouter(), RouteBatcher()
    first = asyncio.create_task(batcher.decide(router, "one"))
    stopped = asyncio.create_task(batcher.decide(router, "two"))
    await asyncio.sleep(0)
    stopped.cancel()
    assert (await first).text == "one"
    broken = RouteBatcher()
    with pytest.raises(RuntimeError, match="encoder broke"):
        await broken.decide(CountingRouter(fail=True), "x")
    assert (await broken.decide(router, "still works")).lane == "chat"


def test_a_new_event_loop_starts_afresh() -> None:
    router, batcher = CountingRouter(), RouteBatcher()
    for _ in range(2):  # as the CLI does: one loop per command
        assert asyncio.run(batcher.decide(router, "hi")).lane == "chat"


@pytest.mark.model
def test_the_real_router_decides_the_same_in_a_batch() -> None:
    from assistant.routing.router import Router

    router = Router.load()
    alone = [router.decide(t) for t in TEXTS]
    together = router.decide_many(TEXTS)
    assert [(d.lane, d.reason, d.text) for d in together] == [
        (d.lane, d.reason, d.text) for d in alone
    ]
    probs = router.classify([t for t in TEXTS if t])
    for t, p in zip([t for t in TEXTS if t], probs, strict=True):
        assert abs(float(router.classify([t])[0]) - float(p)) < 1e-4


@pytest.mark.model
async def test_the_real_router_reads_conversations_in_a_batch_as_decide_does() -> None:
    """Issue 50: the batched path (every page, call and `/v1` turn) read a conversation only
    through the issue-30 rules; `decide` reads it with the conversation classifier."""
    from assistant.routing.router import Router
    from scripts.eval_router import conversation_of, load_conversations

    router = Router.load()
    cases = load_conversations()[::6]  # every group of the project's multi-turn set
    asked = [(c["text"], conversation_of(c)) for c in cases] + [(t, None) for t in TEXTS]
    alone = [router.decide(t, conversation=c) for t, c in asked]
    batcher = RouteBatcher()
    together = await asyncio.gather(*(batcher.decide(router, t, conversation=c) for t, c in asked))
    assert [(d.lane, d.reason, d.text) for d in together] == [
        (d.lane, d.reason, d.text) for d in alone
    ]
    assert sum("(conversation " in d.reason for d in together) >= len(cases) * 0.8
