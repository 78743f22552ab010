"""Disk per login (`max_disk_bytes_per_user`, issue 49 item 6): what a login keeps in the store
is counted as it is written (the store's triggers), a login past its limit gets no new turn
or job, with a refusal naming the limit, and nothing stored is deleted; fast tier."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from assistant import limits
from assistant.errors import Busy, ConfigError
from assistant.jobs import JobQueue
from assistant.records import TurnResult
from assistant.settings import Settings, load_settings
from assistant.store.db import Store
from assistant.store.schema import MIGRATIONS
from assistant.turns.pipeline import Pipeline, TurnRequest

LOGINS = (("ann", "pw"), ("bob", "pw"))


def counted(store: Store, owner: str) -> int:
    """The login's bytes summed over everything it stores (what the triggers keep)."""
    turns = store._query(
        "SELECT COALESCE(SUM(length(CAST(user_text AS BLOB)) + length(CAST(reply AS BLOB))"
        " + length(CAST(reasoning AS BLOB)) + COALESCE(length(CAST(error AS BLOB)), 0)"
        " + length(CAST(timings AS BLOB)) + COALESCE(length(CAST(offer AS BLOB)), 0)), 0)"
        " FROM turns t JOIN conversations c ON c.id = t.conversation_id WHERE c.owner=?",
        (owner,),
    )[0][0]
    jobs = store._query(
        "SELECT COALESCE(SUM(length(CAST(prompt AS BLOB)) + length(CAST(result AS BLOB))"
        " + length(CAST(reasoning AS BLOB)) + COALESCE(length(CAST(error AS BLOB)), 0)), 0)"
        " FROM jobs WHERE owner=?",
        (owner,),
    )[0][0]
    return int(turns + jobs)


def test_a_logins_bytes_follow_every_write_and_delete(tmp_path):
    store = Store(tmp_path / "a.db")
    cid = store.new_conversation("ann")
    assert store.disk_bytes("ann") == 0
    turn = store.start_turn(cid, "héllo wörld", "chat", "r")
    store.save_partial(turn, "a partial ✓ answer", "some reasoning")
    assert store.disk_bytes("ann") == counted(store, "ann") > 0
    store.add_turn(cid, "héllo wörld", TurnResult("the answer", "chat", "r", "stop"), turn_id=turn)
    store.add_turn(cid, "again", TurnResult("more", "chat", "r", "stop", offer="a plan"))
    job, _ = store.create_job("ann", "a long task", 100)
    assert store.claim_job("w", 60, job.id) is not None
    assert store.finish_job(job.id, "w", "done", result="the result " * 10, reasoning="thought")
    bobs = store.new_conversation("bob")
    store.add_turn(bobs, "bob's", TurnResult("his", "chat", "r", "stop"))
    assert store.disk_bytes("ann") == counted(store, "ann")
    assert store.disk_bytes("bob") == counted(store, "bob") > 0
    store.delete_conversation(cid, "ann")  # its turns go; the job stays in the Jobs list
    assert (
        store.disk_bytes("ann")
        == counted(store, "ann")
        == len(("a long task" + "the result " * 10 + "thought").encode())
    )
    assert store.disk_bytes("nobody") == 0


def test_a_store_made_before_the_count_starts_with_what_it_holds(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    for number, step in enumerate(MIGRATIONS[:6], start=1):  # the store before the count
        step(db)
        db.execute(f"PRAGMA user_version={number}")
    db.execute(
        "INSERT INTO conversations (id, owner, title, created_at) VALUES ('c', 'ann', '', 0)"
    )
    db.execute("INSERT INTO turns (conversation_id, created_at, user_text, reply, lane, reason) "
               "VALUES ('c', 0, 'asked', 'answered', 'chat', 'r')")  # fmt: skip
    db.close()
    store = Store(path)
    assert store.disk_bytes("ann") == counted(store, "ann") == len("askedanswered{}")


def test_the_refusal_names_the_limit_and_applies_with_logins_only():
    measured: list[str] = []

    def measure(owner: str) -> int:
        measured.append(owner)
        return 1000

    alone = Settings(max_disk_bytes_per_user=10)  # no logins: the machine's own user
    assert limits.disk_refusal(alone, "local", measure) is None and not measured
    off = Settings(auth=LOGINS, max_disk_bytes_per_user=0)
    assert limits.disk_refusal(off, "ann", measure) is None and not measured
    room = Settings(auth=LOGINS, max_disk_bytes_per_user=1001)
    assert limits.disk_refusal(room, "ann", measure) is None
    full = Settings(auth=LOGINS, max_disk_bytes_per_user=1000)
    why = limits.disk_refusal(full, "ann", measure)
    assert why is not None and "max_disk_bytes_per_user" in why and "1,000 bytes" in why


def test_the_setting_from_the_environment_or_the_file(tmp_path):
    toml = tmp_path / "assistant.toml"
    assert load_settings({}, toml).max_disk_bytes_per_user == 256 * 1024 * 1024
    toml.write_text("max_disk_bytes_per_user = 5000\n")
    assert load_settings({}, toml).max_disk_bytes_per_user == 5000
    env = {"ASSISTANT_MAX_DISK_BYTES_PER_USER": "0"}
    assert load_settings(env, toml).max_disk_bytes_per_user == 0
    with pytest.raises(ConfigError, match="ASSISTANT_MAX_DISK_BYTES_PER_USER"):
        load_settings({"ASSISTANT_MAX_DISK_BYTES_PER_USER": "lots"}, toml)


def test_a_job_of_a_login_over_its_disk_is_refused_and_nothing_is_deleted(tmp_path):
    store = Store(tmp_path / "a.db")
    settings = Settings(auth=LOGINS, max_disk_bytes_per_user=200, data_dir=tmp_path)
    queue = JobQueue(store, settings)
    first = queue.submit("ann", "x" * 300, key="k")
    with pytest.raises(Busy, match="max_disk_bytes_per_user"):
        queue.submit("ann", "one more")
    assert queue.submit("ann", "x" * 300, key="k").id == first.id  # the same job, not a new one
    assert queue.submit("bob", "bob's job").owner == "bob"  # another login: unaffected
    assert [j.id for j in store.jobs("ann")] == [first.id]


def test_a_turn_of_a_login_over_its_disk_is_refused_before_anything_runs():
    class Untouched:
        def __getattr__(self, name: str):
            raise AssertionError(f"the refused turn reached the chat service ({name})")

    pipeline = Pipeline(Untouched(), Settings(), disk=lambda owner: f"{owner}: no room (limit)")

    async def first_event(request: TurnRequest) -> object:
        return await anext(pipeline.stream(request))

    with pytest.raises(Busy, match="ann: no room"):
        asyncio.run(first_event(TurnRequest("hi", owner="ann", conversation_id="c")))
