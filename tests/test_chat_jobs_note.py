"""The conversation knows its jobs (issue 37 item 4, DESIGN.md 4): a chat turn's request to
the engine carries a short status of this conversation's latest job (state, elapsed, tokens
so far, the result's opening when done) after the history, so "how's the report going?" is
answered from the job. Checked on the simulated engine by what it received; nothing about
another login's jobs, and nothing when the conversation has none."""

from __future__ import annotations

from assistant.engine.lanes import LaneScheduler
from assistant.jobs import JobQueue
from assistant.prompting.prompt import Prompts
from assistant.store.db import Store
from assistant.turns.chat import ChatService
from assistant.turns.pipeline import Pipeline, TurnRequest
from tests.conftest import sim_engine, sim_settings
from tests.simengine_proc import sim_requests, sim_reset
from tests.test_chat import StubRouter

TASK = "Write a full competitive analysis of CRM tools for small agencies"
RESULT = "# CRM tools for agencies\n\nHubSpot leads on ease of use.\nPipedrive on price."


def _pipeline(settings, url) -> Pipeline:
    store = Store(settings.db_path)
    chat = ChatService(
        settings=settings,
        engine=sim_engine(url),
        scheduler=LaneScheduler(deep_max_in_flight=2),
        router=StubRouter(),
        store=store,
        prompts=Prompts.load(),
        jobs=JobQueue(store, settings),
    )
    return Pipeline(chat, settings, log_to=store)


def _last_request(url: str) -> list[dict]:
    (sent,) = [r for r in sim_requests(url) if r["body"].get("messages")][-1:]
    return sent["body"]["messages"]


async def test_the_chat_request_carries_the_conversations_job(sim_url, settings):
    s = sim_settings(settings, sim_url)
    turns = _pipeline(s, sim_url)
    store = turns.chat.store
    cid = store.new_conversation("ann")
    await turns.run(TurnRequest(text="hello", owner="ann", conversation_id=cid))
    job, _ = store.create_job("ann", TASK, 4096, conversation_id=cid)

    sim_reset(sim_url)
    await turns.run(TurnRequest(text="how's the report going?", owner="ann", conversation_id=cid))
    messages = _last_request(sim_url)
    assert messages[0]["role"] == "system"
    # after the history (the first turn), in the per-turn part: the prefix stays cached
    assert messages[1]["content"] == "hello" and messages[2]["role"] == "assistant"
    last = messages[-1]["content"]
    assert last.endswith("how's the report going?")
    assert f"job {job.id}" in last and "queued" in last and "competitive analysis" in last
    assert not any("job" in m["content"] for m in messages[:-1] if m["role"] == "system")

    with store.tx() as db:
        db.execute(
            "UPDATE jobs SET state='done', result=?, answer_tokens=812, reasoning_tokens=3000,"
            " elapsed_s=95 WHERE id=?",
            (RESULT, job.id),
        )
    sim_reset(sim_url)
    await turns.run(TurnRequest(text="what did it say?", owner="ann", conversation_id=cid))
    last = _last_request(sim_url)[-1]["content"]
    assert "done, 95 s elapsed" in last and "812 answer tokens" in last
    assert "HubSpot leads on ease of use." in last and last.endswith("what did it say?")


async def test_no_job_no_note_and_never_another_logins(sim_url, settings):
    s = sim_settings(settings, sim_url)
    turns = _pipeline(s, sim_url)
    store = turns.chat.store
    mine = store.new_conversation("ann")
    sim_reset(sim_url)
    await turns.run(TurnRequest(text="is it done?", owner="ann", conversation_id=mine))
    assert _last_request(sim_url)[-1]["content"] == "is it done?"

    theirs = store.new_conversation("bob")
    store.create_job("bob", "Bob's secret merger memo", 4096, conversation_id=theirs)
    sim_reset(sim_url)
    # a conversation id that is not ann's carries nothing of bob's job
    await turns.run(TurnRequest(text="is it done?", owner="ann", conversation_id=theirs))
    sent = " ".join(m["content"] for m in _last_request(sim_url))
    assert "merger" not in sent and "job" not in sent.split("is it done?")[0][-200:]


# --- issue 37 item 3: the model's own delegate call after an offer ----------------------------

PLAN = "write the complete migration plan with phases, risks and a rollback strategy"
OFFER = f"Start with a gateway in front of the REST endpoints. Shall I {PLAN}?"
ASKED = "any tips for moving our app from REST to GraphQL?"


async def test_a_model_delegate_call_after_an_offer_is_the_offered_task(sim_url, settings):
    """The router says chat (a stub here); the chat lane still offers `delegate`, the model
    calls it, and the job's text is the offered task, not "sure"."""
    s = sim_settings(settings, sim_url)
    turns = _pipeline(s, sim_url)
    request = TurnRequest(text="sure SIMDELEGATE", owner="ann", history=((ASKED, OFFER),))
    result = await turns.run(request)
    assert (result.lane, result.reason) == ("deep", "model asked to delegate")
    prompt = turns.chat.store.job(result.job_id).prompt
    assert prompt.startswith(PLAN[0].upper() + PLAN[1:]) and ASKED in prompt
    # no offer before: the job is the message, as before
    alone = await turns.run(TurnRequest(text="plan it all SIMDELEGATE", owner="ann"))
    assert turns.chat.store.job(alone.job_id).prompt == "plan it all SIMDELEGATE"
