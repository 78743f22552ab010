"""The jobs table: the store is also the job queue.

A worker claims a queued job under a lease it keeps alive with a heartbeat; a lease that
expires (the worker died) makes the job claimable again.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from assistant.errors import Conflict
from assistant.records import Job

MAX_CRASHES = 3
"""Deaths of the process while a job ran before the job fails instead of running again."""
CRASH_LOOP = (
    "the app stopped {n} times while running this job (it may be what stops it), so it is not "
    "started again; what it produced is kept; retry to run it once more"
)

_JOB_COLUMNS = (
    "id owner prompt state created_at updated_at result reasoning error budget "
    "reasoning_tokens answer_tokens elapsed_s attempts idempotency_key notified"
).split()


class JobRows:
    """The job queue's queries; mixed into `Store`, which owns the connection."""

    clock: Callable[[], float] = staticmethod(time.time)
    """Wall-clock seconds for timestamps and leases; tests move it by hand instead of
    sleeping past a lease (which a busy machine can stretch either way)."""

    def tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        raise NotImplementedError

    def create_job(
        self,
        owner: str,
        prompt: str,
        budget: int,
        idempotency_key: str | None = None,
        conversation_id: str | None = None,
    ) -> tuple[Job, bool]:
        """Store a queued job; with a key already used by this owner, return that job instead
        (Conflict if it was for other text)."""
        now = self.clock()
        with self.tx() as db:
            if idempotency_key:
                row = db.execute(
                    "SELECT * FROM jobs WHERE owner=? AND idempotency_key=?",
                    (owner, idempotency_key),
                ).fetchone()
                if row is not None and row["prompt"] != prompt:
                    # a retried request repeats its text; other text under the same key is a
                    # client's mistake, and answering with the old job would hide it
                    raise Conflict(
                        f"the key {idempotency_key!r} was already used for job {row['id']} "
                        "with other text; use a new key for a new job"
                    )
                if row is not None:
                    return _job_from_row(row), False
            jid = uuid.uuid4().hex[:12]
            db.execute(
                "INSERT INTO jobs (id, owner, prompt, state, created_at, updated_at, budget, "
                "idempotency_key, conversation_id) VALUES (?,?,?,'queued',?,?,?,?,?)",
                (jid, owner, prompt, now, now, budget, idempotency_key, conversation_id),
            )
            row = db.execute("SELECT * FROM jobs WHERE id=?", (jid,)).fetchone()
            return _job_from_row(row), True

    def job(self, job_id: str) -> Job | None:
        rows = self._query("SELECT * FROM jobs WHERE id=?", (job_id,))
        return _job_from_row(rows[0]) if rows else None

    def jobs(self, owner: str | None = None, limit: int = 100) -> list[Job]:
        if owner is None:
            rows = self._query("SELECT * FROM jobs ORDER BY created_at DESC LIMIT ?", (limit,))
        else:
            rows = self._query(
                "SELECT * FROM jobs WHERE owner=? ORDER BY created_at DESC LIMIT ?",
                (owner, limit),
            )
        return [_job_from_row(r) for r in rows]

    def active_job_count(self, owner: str) -> int:
        rows = self._query(
            "SELECT COUNT(*) FROM jobs WHERE owner=? AND state IN ('queued','running')", (owner,)
        )
        return int(rows[0][0])

    def job_counts(self) -> dict[str, int]:
        rows = self._query("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
        return {r["state"]: r["n"] for r in rows}

    def claim_job(self, worker: str, lease_s: float, job_id: str | None = None) -> Job | None:
        """Take a queued job (or one whose lease expired) and lease it to `worker`: the oldest
        of the login with the fewest jobs running, so logins take turns on the deep lane (one
        login's five jobs do not all go before another's one; issue 49). A job whose lease
        expired was running when its worker died: that counts as a crash."""
        now = self.clock()
        with self.tx() as db:
            sql = (
                "SELECT * FROM jobs WHERE (state='queued' OR (state='running' AND lease_until<?))"
                + (" AND id=?" if job_id else "")
                + " ORDER BY (SELECT COUNT(*) FROM jobs AS r WHERE r.owner=jobs.owner"
                " AND r.state='running' AND r.lease_until>=?), created_at LIMIT 1"
            )
            while True:
                args = (now, job_id, now) if job_id else (now, now)
                row = db.execute(sql, args).fetchone()
                if row is None:
                    return None
                if row["state"] == "queued" or not _crashed(db, row["id"], row["crashes"], now):
                    break
            db.execute(
                "UPDATE jobs SET state='running', lease_owner=?, lease_until=?, "
                "attempts=attempts+1, updated_at=? WHERE id=?",
                (worker, now + lease_s, now, row["id"]),
            )
            return _job_from_row(
                db.execute("SELECT * FROM jobs WHERE id=?", (row["id"],)).fetchone()
            )

    def heartbeat(self, job_id: str, worker: str, lease_s: float, **progress: Any) -> bool:
        """Extend the lease and save progress. False: the job is no longer ours (e.g. cancelled)."""
        sets = ", ".join(f"{k}=?" for k in progress)
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET lease_until=?, updated_at=?"
                + (f", {sets}" if sets else "")
                + " WHERE id=? AND lease_owner=? AND state='running'",
                (self.clock() + lease_s, self.clock(), *progress.values(), job_id, worker),
            )
            return cur.rowcount == 1

    def finish_job(self, job_id: str, worker: str | None, state: str, **fields: Any) -> bool:
        """Move a job to a final state (or back to queued); only the lease holder may, if given."""
        sets = ", ".join(f"{k}=?" for k in fields)
        where = "id=? AND state='running'" + (" AND lease_owner=?" if worker else "")
        args: tuple = (job_id, worker) if worker else (job_id,)
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state=?, updated_at=?, lease_owner=NULL, lease_until=NULL"
                + (f", {sets}" if sets else "")
                + f" WHERE {where}",
                (state, self.clock(), *fields.values(), *args),
            )
            return cur.rowcount == 1

    def cancel_job(self, job_id: str, owner: str | None = None) -> bool:
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state='cancelled', updated_at=?, lease_owner=NULL "
                "WHERE id=? AND state IN ('queued','running')" + (" AND owner=?" if owner else ""),
                (self.clock(), job_id, owner) if owner else (self.clock(), job_id),
            )
            return cur.rowcount == 1

    def requeue(self, job_id: str, **fields: Any) -> bool:
        """Put a failed or cancelled job back in the queue (retry), keeping its id."""
        sets = ", ".join(f"{k}=?" for k in fields)
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state='queued', error=NULL, notified=0, crashes=0, updated_at=?"
                + (f", {sets}" if sets else "")
                + " WHERE id=? AND state IN ('failed','cancelled')",
                (self.clock(), *fields.values(), job_id),
            )
            return cur.rowcount == 1

    def recover_running(self, is_dead: Callable[[str], bool] = lambda owner: False) -> int:
        """At start: jobs left running by a dead worker go back to the queue (their partial
        output stays, so the next run continues from it), or fail once they have been running
        at MAX_CRASHES deaths of their worker. Returns how many were requeued."""
        now = self.clock()
        with self.tx() as db:
            rows = db.execute(
                "SELECT id, lease_owner, lease_until, crashes FROM jobs WHERE state='running'"
            ).fetchall()
            stale = [
                r
                for r in rows
                if r["lease_until"] is None
                or r["lease_until"] < now
                or is_dead(r["lease_owner"] or "")
            ]
            requeued = [r for r in stale if not _crashed(db, r["id"], r["crashes"], now)]
            for r in requeued:
                db.execute(
                    "UPDATE jobs SET state='queued', lease_owner=NULL, lease_until=NULL, "
                    "updated_at=? WHERE id=?",
                    (now, r["id"]),
                )
            return len(requeued)

    def conversation_job(self, conversation_id: str) -> Job | None:
        """The latest job a conversation delegated: routing reads whether it still runs."""
        rows = self._query(
            "SELECT * FROM jobs WHERE conversation_id=? ORDER BY created_at DESC LIMIT 1",
            (conversation_id,),
        )
        return _job_from_row(rows[0]) if rows else None

    def unnotified(self, owner: str) -> list[Job]:
        rows = self._query(
            "SELECT * FROM jobs WHERE owner=? AND notified=0 AND state IN ('done','failed') "
            "ORDER BY updated_at",
            (owner,),
        )
        return [_job_from_row(r) for r in rows]

    def mark_notified(self, job_id: str) -> None:
        with self.tx() as db:
            db.execute("UPDATE jobs SET notified=1 WHERE id=?", (job_id,))


def _crashed(db: sqlite3.Connection, job_id: str, crashes: int, now: float) -> bool:
    """Count one more death of a worker while it ran this job; True: that was the last one
    allowed, and the job failed (saying why) instead of running again."""
    crashes += 1
    if crashes < MAX_CRASHES:
        db.execute("UPDATE jobs SET crashes=? WHERE id=?", (crashes, job_id))
        return False
    db.execute(
        "UPDATE jobs SET crashes=?, state='failed', error=?, lease_owner=NULL, "
        "lease_until=NULL, updated_at=? WHERE id=?",
        (crashes, CRASH_LOOP.format(n=crashes), now, job_id),
    )
    return True


def _job_from_row(row: sqlite3.Row) -> Job:
    data = {k: row[k] for k in _JOB_COLUMNS}
    data["notified"] = bool(data["notified"])
    return Job(**data)
