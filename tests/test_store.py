"""The store on a real SQLite file: migrations, WAL, turns, idempotent jobs, leases."""

from __future__ import annotations

import sqlite3

from assistant.records import Timings, TurnResult
from assistant.store.db import MIGRATIONS, PENDING, Store
from assistant.store.jobs import MAX_CRASHES


def test_migrations_run_once_and_wal_is_on(tmp_path):
    path = tmp_path / "a.db"
    Store(path).close()
    store = Store(path)  # a second open must not re-run migrations
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
    assert store.integrity_ok()


def test_turns_keep_timings_and_order(tmp_path):
    store = Store(tmp_path / "a.db")
    cid = store.new_conversation("ann", "first")
    for i in range(3):
        result = TurnResult(f"reply {i}", "chat", "classifier 0.9", "stop", Timings(ttft=10.0 + i))
        store.add_turn(cid, f"q{i}", result)
    turns = store.turns(cid)
    assert [u for u, _ in turns] == ["q0", "q1", "q2"]
    assert turns[2][1].timings.ttft == 12.0 and turns[2][1].reason == "classifier 0.9"
    assert store.recent_timings("ann")[0]["timings"] == {"ttft": 12.0}
    assert store.recent_timings("bob") == []


def test_same_idempotency_key_gives_one_job(tmp_path):
    store = Store(tmp_path / "a.db")
    a, created_a = store.create_job("ann", "task", 32768, idempotency_key="k1")
    b, created_b = store.create_job("ann", "task", 32768, idempotency_key="k1")
    c, _ = store.create_job("bob", "task", 32768, idempotency_key="k1")  # another user's key
    assert created_a and not created_b and a.id == b.id
    assert c.id != a.id
    assert len(store.jobs("ann")) == 1


class Clock:
    """Seconds that move only when the test says: a lease runs out because the test moved
    the clock past it, never because a busy machine was slow between two lines."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_lease_claim_heartbeat_and_recovery(tmp_path):
    clock = Clock()
    store = Store(tmp_path / "a.db", clock=clock)
    job, _ = store.create_job("ann", "task", 32768)
    claimed = store.claim_job("w1", lease_s=10)
    assert claimed is not None and claimed.id == job.id and claimed.state == "running"
    clock.now += 9.9
    assert store.claim_job("w2", lease_s=10) is None  # still leased to w1
    assert store.heartbeat(job.id, "w1", 10, result="partial", answer_tokens=3)
    clock.now += 9.9  # past the first lease, within the one the heartbeat renewed
    assert store.claim_job("w2", lease_s=10) is None
    # w1 died: once its lease runs out, another worker claims the job
    clock.now += 0.2
    again = store.claim_job("w2", lease_s=5)
    assert again is not None and again.id == job.id and again.result == "partial"
    assert not store.heartbeat(job.id, "w1", 5)  # the old worker no longer owns it
    assert store.finish_job(job.id, "w2", "done", result="all")
    assert store.job(job.id).state == "done"


def test_the_store_uses_the_wall_clock_by_default(tmp_path):
    import time

    store = Store(tmp_path / "a.db")
    job, _ = store.create_job("ann", "task", 1)
    assert abs(store.job(job.id).created_at - time.time()) < 3600


def test_recover_running_requeues_expired_leases(tmp_path):
    store = Store(tmp_path / "a.db")
    job, _ = store.create_job("ann", "task", 32768)
    store.claim_job("dead", lease_s=-1)  # already expired
    assert store.recover_running() == 1
    assert store.job(job.id).state == "queued"


def test_a_turn_is_stored_when_it_starts_and_its_end_over_it(tmp_path):
    store = Store(tmp_path / "a.db")
    cid = store.new_conversation("ann")
    tid = store.start_turn(cid, "what I said", "chat", "classifier 0.9")
    store.save_partial(tid, "the first words", "")
    # the process dies here: the words and what had arrived stay, marked incomplete
    (said, kept), = Store(tmp_path / "a.db").turns(cid)  # fmt: skip
    assert said == "what I said" and kept.reply == "the first words"
    assert kept.incomplete and kept.error == PENDING and kept.finish_reason == "interrupted"
    done = TurnResult("the whole reply", "chat", "classifier 0.9", "stop")
    assert store.add_turn(cid, "what I said", done, turn_id=tid) == tid
    (said, ended), = store.turns(cid)  # fmt: skip
    assert ended.reply == "the whole reply" and not ended.incomplete and ended.error is None


def test_a_job_that_takes_its_worker_down_fails_after_max_crashes(tmp_path):
    store = Store(tmp_path / "a.db")
    job, _ = store.create_job("ann", "task", 32768)
    for crash in range(1, MAX_CRASHES):
        assert store.claim_job(f"w{crash}", lease_s=30) is not None
        assert store.recover_running(lambda worker: True) == 1  # its worker is gone
        assert store.job(job.id).state == "queued"
    store.claim_job("last", lease_s=-1)  # dies too; found by its expired lease this time
    assert store.claim_job("next", lease_s=30) is None  # not taken up again
    failed = store.job(job.id)
    assert failed.state == "failed" and f"stopped {MAX_CRASHES} times" in (failed.error or "")
    assert store.requeue(job.id)  # Retry gives it its crashes back
    assert store.claim_job("w", lease_s=30) is not None
    assert store.recover_running(lambda worker: True) == 1


def test_cancel_and_retry(tmp_path):
    store = Store(tmp_path / "a.db")
    job, _ = store.create_job("ann", "task", 1000)
    assert not store.cancel_job(job.id, owner="bob")  # not bob's
    assert store.cancel_job(job.id, owner="ann")
    assert store.job(job.id).state == "cancelled"
    assert store.requeue(job.id, budget=2000)
    assert store.job(job.id).state == "queued" and store.job(job.id).budget == 2000


def test_store_is_readable_by_plain_sqlite(tmp_path):
    store = Store(tmp_path / "a.db")
    store.create_job("ann", "task", 1)
    other = sqlite3.connect(tmp_path / "a.db")
    assert other.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1
