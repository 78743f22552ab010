"""The conversation classifier (issue 37, `assistant/routing/context.py`): the last exchange,
embedded and learned, decides the lane of a message that has turns before it.

Its training set (`assistant/data/router_conversations.jsonl`) is composed by
`scripts/make_router_conversations.py` from parts written for it; the project's multi-turn
set and the blind dev set are never trained on, and none of their requests is, or nearly is,
one of its requests (checked here with the training script's own twin test). Tests marked
`model` run the real MiniLM encoder and the shipped heads.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from assistant.routing import context
from assistant.routing.conversation import Conversation
from assistant.routing.router import Router, routed_text
from scripts.eval_router import CONVERSATIONS, conversation_of, decision_ms, load_conversations
from scripts.train_router import (
    CONTEXT_OUT,
    digests,
    load_cases,
    requests_of,
    twins,
    user_texts,
)
from scripts.train_router import (
    CONVERSATIONS as TRAIN,
)


@pytest.fixture(scope="module")
def router() -> Router:
    return Router.load().warm()


def test_training_set_is_large_varied_and_apart_from_the_dev_set():
    cases = load_cases(TRAIN)
    assert len(cases) >= 5000
    assert 0.4 <= np.mean([c["lane"] == "deep" for c in cases]) <= 0.6
    assert {c["act"] for c in cases} == set(context.ACTS)
    assert sum(c["style"] == "spoken" for c in cases) >= len(cases) / 5
    dev = requests_of(load_conversations(CONVERSATIONS))
    leaked = {mine for _, mine, _ in twins(sorted(set(user_texts(cases))), dev)}
    # the training script leaves such conversations out; here: they are few
    assert len(leaked) <= 10, leaked


def test_shipped_context_head_names_the_data_it_was_fitted_on():
    with np.load(CONTEXT_OUT) as z:
        meta = json.loads(str(z["meta"]))
    assert meta["trained_on"] == digests([TRAIN])


def test_messages_are_read_as_the_message_classifier_reads_them():
    from assistant.routing.router import ROUTE_TOKENS

    assert context.MESSAGE_TOKENS == ROUTE_TOKENS


def test_focus_keeps_the_offering_sentences_and_the_last():
    reply = (
        "Mostly setting up accounts. I can write the full migration plan for you: mapping, "
        "balances and the cutover. Banks need a week. Good luck!"
    )
    assert context.focus(reply) == (
        "I can write the full migration plan for you: mapping, balances and the cutover. Good luck!"
    )
    assert context.focus("") == ""


def test_lexical_features_are_stable_and_forgive_typos():
    yes, typo, no = (context.lexical(t) for t in ("yes please", "yse pleese", "no thanks"))
    assert np.allclose(yes, context.lexical("yes please"))
    assert float(yes @ typo) > float(yes @ no)


@pytest.mark.model
@pytest.mark.parametrize(
    ("turns", "text", "lane"),
    [
        # an offer in other words, then a yes in an unusual style
        ([("user", "how do I get our team onto a shared password manager?"),
          ("assistant", "Pick one with SSO and roll it out by team. I could write the complete "
           "rollout plan with a timeline, training and a policy draft.")], "👍 go", "deep"),
        # the same offer, then a no, and a statement that is no yes
        ([("user", "how do I get our team onto a shared password manager?"),
          ("assistant", "Pick one with SSO. Shall I write the complete rollout plan with a "
           "timeline, training and a policy draft?")], "not now, thanks", "chat"),
        # a small offer accepted
        ([("user", "what's 12 km in miles?"),
          ("assistant", "About 7.5 miles. Want me to convert your whole route's splits too?")],
         "sure", "chat"),
        # a clarifying answer that completes a hard request
        ([("user", "write me a complete onboarding handbook"),
          ("assistant", "Happy to. For what kind of company, and how many people?")],
         "a 40-person architecture studio in Oslo", "deep"),
        # a status question about the running job
        ([("user", "write a full competitor analysis of budget airlines"),
          ("assistant", "That's running in the background now.")], "any news on that?", "chat"),
    ],
)  # fmt: skip
def test_exchanges_nobody_listed(router: Router, turns, text, lane):
    job = "running" if "background" in turns[-1][1] else None
    d = router.decide(text, conversation=Conversation(turns=tuple(turns), job=job))
    assert d.lane == lane, d.reason
    assert "(conversation " in d.reason


_CANNED = "The answer is ready."  # the test tier's tiny model says only this (tests/vllm_proc.py)


@pytest.mark.model
@pytest.mark.parametrize(
    "turns",
    [
        # the page's turns in test_vllm_page: a question, a spoken turn, each answered canned
        (("user", "What is the capital of France?"), ("assistant", _CANNED),
         ("user", "Ask not what your country can do for you."), ("assistant", _CANNED)),
        (("user", "think hard about the halting problem"), ("assistant", _CANNED)),
        (("user", "who wrote Middlemarch?"), ("assistant", "George Eliot.")),
        (("user", "hello"), ("assistant", "Hi! What can I do for you today?")),
        (("user", "is it cold out?"), ("assistant", "About 4 degrees, with wind.")),
    ],
)  # fmt: skip
@pytest.mark.parametrize(
    "text",
    ["Keep talking please [[long]]", "Keep talking please", "hi!", "thanks", "ok", "cool",
     "great, thanks!", "nice", "good morning", "how are you?"],
)  # fmt: skip
def test_small_messages_after_replies_that_offer_nothing_stay_chat(router: Router, turns, text):
    """Issue 50: after a reply that offers and asks nothing (the tiny model's canned line, a
    plain answer, a greeting), a small message is small work. The conversation classifier
    sent "Keep talking please" (0.59) and "hi!" (0.58) after the canned line to the deep lane,
    and "ok", "thanks", "cool" after plain answers: its training conversations had small
    messages only after offers (a yes) and "is ready" only in a job's notice."""
    d = router.decide(text, conversation=Conversation(turns=turns))
    assert "(conversation " in d.reason
    assert d.lane == "chat", d.reason


def _zero(i: int) -> float:
    return 0.0


def test_a_reply_the_app_knows_went_chat_is_no_jobs_notice():
    """ "The answer is ready." reads like a job's notice ("... is ready"); on the page the app
    knows the request it answered went to the chat lane, and then it is an answer (issue 50:
    test_vllm_page's spoken turn after it was taken for a follow-up of a job and went deep)."""
    turns = (("user", "What is the capital of France?"), ("assistant", _CANNED))
    notice = [
        context.facts(context.parts("hi", Conversation(turns=turns, last_lane=lane)), _zero)[10]
        for lane in (None, "chat", "deep")
    ]  # fmt: skip
    assert notice == [1.0, 0.0, 1.0]


@pytest.mark.model
def test_an_accepted_offer_becomes_the_jobs_text(router: Router):
    offer = "I could write the complete rollout plan with a timeline and training."
    conv = Conversation(turns=(("user", "password managers for a team?"), ("assistant", offer)))
    d = router.decide("yes, but keep it short", conversation=conv)
    assert d.lane == "deep"
    assert "rollout plan" in d.text and "keep it short" in d.text


@pytest.mark.model
def test_decision_time_is_measured(router: Router):
    """Reported, not asserted: the CI machine is shared. The figures are carried by
    `scripts/eval_router.py --blind` (docs/routing.md, "Decision time"); what keeps them
    small is checked below, by what the encoder is given."""
    ms = decision_ms(router, load_conversations(CONVERSATIONS)[:60])
    print("\nconversation decision ms: " + ", ".join(f"{k} {v:.1f}" for k, v in ms.items()))
    assert set(ms) == {
        f"{k} p{q}" for k in ("cold", "in a conversation", "replies remembered") for q in (50, 95)
    }
    assert all(np.isfinite(v) and v > 0 for v in ms.values())


class _Counting:
    """The router's encoder, recording the texts of each pass."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.passes: list[list[str]] = []

    def encode(self, texts, **kw):
        self.passes.append(list(texts))
        return self.encoder.encode(texts, **kw)


@pytest.mark.model
def test_a_decision_in_a_conversation_is_one_encoder_pass(router: Router, monkeypatch):
    """The cost of a decision is its encoder work: one pass, over no more than the texts the
    conversation classifier reads, and none again once they are embedded."""
    counting = _Counting(router.encoder)
    monkeypatch.setattr(router, "encoder", counting)
    most = 3 + context.EARLIER_READ  # the message, the last reply, the one before, requests
    cases = load_conversations(CONVERSATIONS)[:60]
    for case in cases:
        conv = conversation_of(case)
        router._cache.clear()
        counting.passes.clear()
        first = router.decide(case["text"], conversation=conv)
        assert len(counting.passes) == 1, (case["text"], counting.passes)
        (texts,) = counting.passes
        assert 0 < len(texts) <= most and len(set(texts)) == len(texts), texts
        # the same turns again (the next decision in this conversation reads them): cached
        again = router.decide(case["text"], conversation=conv)
        assert len(counting.passes) == 1, counting.passes[1:]
        assert (again.lane, again.reason) == (first.lane, first.reason)


@pytest.mark.model
def test_a_reply_remembered_when_written_leaves_the_decision_its_message(
    router: Router, monkeypatch
):
    """Issue 50, item 4: the app embeds each reply when it is written (`Router.remember`, off
    the decision path), so the next turn's decision embeds its message alone; the decision
    is the one made without it."""
    counting = _Counting(router.encoder)
    monkeypatch.setattr(router, "encoder", counting)
    for case in load_conversations(CONVERSATIONS)[:30]:
        conv = conversation_of(case)
        router._cache.clear()
        cold = router.decide(case["text"], conversation=conv)
        router._cache.clear()
        for role, said in conv.turns:  # each turn as it came: requests routed, replies written
            if role == "assistant":
                router.remember(said)
            else:
                router.vectors([routed_text(said)], [context.MESSAGE_TOKENS])
        counting.passes.clear()
        d = router.decide(case["text"], conversation=conv)
        assert counting.passes in ([], [[routed_text(case["text"])]]), counting.passes
        assert (d.lane, d.reason) == (cold.lane, cold.reason)
