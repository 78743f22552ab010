"""The store: conversations, turns and jobs in one SQLite file (WAL), with numbered migrations.

The store is also the job queue: a worker claims a queued job under a lease it keeps alive
with a heartbeat; a lease that expires (the worker died) makes the job claimable again.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from assistant.records import Job, Timings, TurnResult


def _script(db: sqlite3.Connection, sql: str) -> None:
    """Run several statements inside the caller's transaction (executescript would commit)."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


def _m1_core(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL
        );
        CREATE TABLE turns (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id TEXT NOT NULL REFERENCES conversations(id),
            created_at REAL NOT NULL,
            source TEXT NOT NULL DEFAULT 'text',
            user_text TEXT NOT NULL,
            reply TEXT NOT NULL DEFAULT '',
            reasoning TEXT NOT NULL DEFAULT '',
            lane TEXT NOT NULL,
            reason TEXT NOT NULL,
            finish_reason TEXT,
            incomplete INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            timings TEXT NOT NULL DEFAULT '{}',
            tokens INTEGER NOT NULL DEFAULT 0,
            tokens_per_s REAL,
            job_id TEXT
        );
        CREATE INDEX turns_by_conversation ON turns(conversation_id, id);
        """,
    )


def _m2_jobs(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            prompt TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('queued','running','done','failed','cancelled')),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            result TEXT NOT NULL DEFAULT '',
            reasoning TEXT NOT NULL DEFAULT '',
            error TEXT,
            budget INTEGER NOT NULL DEFAULT 0,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            answer_tokens INTEGER NOT NULL DEFAULT 0,
            elapsed_s REAL NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,
            idempotency_key TEXT,
            lease_owner TEXT,
            lease_until REAL,
            conversation_id TEXT,
            notified INTEGER NOT NULL DEFAULT 0,
            UNIQUE (owner, idempotency_key)
        );
        CREATE INDEX jobs_by_state ON jobs(state, created_at);
        """,
    )


# Append only: a migration, once shipped, never changes. user_version counts those applied.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_m1_core, _m2_jobs]

_JOB_COLUMNS = (
    "id owner prompt state created_at updated_at result reasoning error budget "
    "reasoning_tokens answer_tokens elapsed_s attempts idempotency_key notified"
).split()


class Store:
    """One SQLite file. Thread-safe; every write is one short transaction."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=10000")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def _migrate(self) -> None:
        with self.tx() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
                step(db)
                db.execute(f"PRAGMA user_version={number}")

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def _query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self.db.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def integrity_ok(self) -> bool:
        return self._query("PRAGMA integrity_check")[0][0] == "ok"

    # conversations and turns

    def new_conversation(self, owner: str, title: str = "") -> str:
        cid = uuid.uuid4().hex
        with self.tx() as db:
            db.execute(
                "INSERT INTO conversations (id, owner, title, created_at) VALUES (?,?,?,?)",
                (cid, owner, title[:80], time.time()),
            )
        return cid

    def conversation_owner(self, cid: str) -> str | None:
        rows = self._query("SELECT owner FROM conversations WHERE id=?", (cid,))
        return rows[0]["owner"] if rows else None

    def conversations(self, owner: str, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT id, title, created_at FROM conversations WHERE owner=? "
            "ORDER BY created_at DESC LIMIT ?",
            (owner, limit),
        )
        return [dict(r) for r in rows]

    def add_turn(
        self, conversation_id: str, user_text: str, result: TurnResult, source: str = "text"
    ) -> int:
        with self.tx() as db:
            cur = db.execute(
                "INSERT INTO turns (conversation_id, created_at, source, user_text, reply, "
                "reasoning, lane, reason, finish_reason, incomplete, error, timings, tokens, "
                "tokens_per_s, job_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    conversation_id,
                    time.time(),
                    source,
                    user_text,
                    result.reply,
                    result.reasoning,
                    result.lane,
                    result.reason,
                    result.finish_reason,
                    int(result.incomplete),
                    result.error,
                    json.dumps(result.timings.as_dict()),
                    result.tokens,
                    result.tokens_per_s,
                    result.job_id,
                ),
            )
            return int(cur.lastrowid or 0)

    def turns(self, conversation_id: str) -> list[tuple[str, TurnResult]]:
        rows = self._query(
            "SELECT * FROM turns WHERE conversation_id=? ORDER BY id", (conversation_id,)
        )
        return [(r["user_text"], _turn_from_row(r)) for r in rows]

    def recent_timings(self, owner: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """The latest turns' lane, source and timings, newest first."""
        sql = (
            "SELECT t.lane, t.source, t.timings, t.created_at FROM turns t "
            "JOIN conversations c ON c.id = t.conversation_id "
            + ("WHERE c.owner=? " if owner else "")
            + "ORDER BY t.id DESC LIMIT ?"
        )
        args = (owner, limit) if owner else (limit,)
        return [
            {"lane": r["lane"], "source": r["source"], "timings": json.loads(r["timings"])}
            for r in self._query(sql, args)
        ]

    # jobs

    def create_job(
        self,
        owner: str,
        prompt: str,
        budget: int,
        idempotency_key: str | None = None,
        conversation_id: str | None = None,
    ) -> tuple[Job, bool]:
        """Store a queued job; with a key already used by this owner, return that job instead."""
        now = time.time()
        with self.tx() as db:
            if idempotency_key:
                row = db.execute(
                    "SELECT * FROM jobs WHERE owner=? AND idempotency_key=?",
                    (owner, idempotency_key),
                ).fetchone()
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
        """Take the oldest queued job (or one whose lease expired) and lease it to `worker`."""
        now = time.time()
        with self.tx() as db:
            sql = (
                "SELECT * FROM jobs WHERE (state='queued' OR (state='running' AND lease_until<?))"
                + (" AND id=?" if job_id else "")
                + " ORDER BY created_at LIMIT 1"
            )
            row = db.execute(sql, (now, job_id) if job_id else (now,)).fetchone()
            if row is None:
                return None
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
                (time.time() + lease_s, time.time(), *progress.values(), job_id, worker),
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
                (state, time.time(), *fields.values(), *args),
            )
            return cur.rowcount == 1

    def cancel_job(self, job_id: str, owner: str | None = None) -> bool:
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state='cancelled', updated_at=?, lease_owner=NULL "
                "WHERE id=? AND state IN ('queued','running')" + (" AND owner=?" if owner else ""),
                (time.time(), job_id, owner) if owner else (time.time(), job_id),
            )
            return cur.rowcount == 1

    def requeue(self, job_id: str, **fields: Any) -> bool:
        """Put a failed or cancelled job back in the queue (retry), keeping its id."""
        sets = ", ".join(f"{k}=?" for k in fields)
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state='queued', error=NULL, notified=0, updated_at=?"
                + (f", {sets}" if sets else "")
                + " WHERE id=? AND state IN ('failed','cancelled')",
                (time.time(), *fields.values(), job_id),
            )
            return cur.rowcount == 1

    def recover_running(self, is_dead: Callable[[str], bool] = lambda owner: False) -> int:
        """At start: jobs left running by a dead worker go back to the queue (their partial
        output stays, so the next run continues from it)."""
        now = time.time()
        with self.tx() as db:
            rows = db.execute(
                "SELECT id, lease_owner, lease_until FROM jobs WHERE state='running'"
            ).fetchall()
            stale = [
                r["id"]
                for r in rows
                if r["lease_until"] is None
                or r["lease_until"] < now
                or is_dead(r["lease_owner"] or "")
            ]
            for jid in stale:
                db.execute(
                    "UPDATE jobs SET state='queued', lease_owner=NULL, lease_until=NULL, "
                    "updated_at=? WHERE id=?",
                    (now, jid),
                )
            return len(stale)

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


def _job_from_row(row: sqlite3.Row) -> Job:
    data = {k: row[k] for k in _JOB_COLUMNS}
    data["notified"] = bool(data["notified"])
    return Job(**data)


def _turn_from_row(r: sqlite3.Row) -> TurnResult:
    return TurnResult(
        reply=r["reply"],
        lane=r["lane"],
        reason=r["reason"],
        finish_reason=r["finish_reason"],
        timings=Timings(**json.loads(r["timings"])),
        reasoning=r["reasoning"],
        error=r["error"],
        incomplete=bool(r["incomplete"]),
        job_id=r["job_id"],
        tokens=r["tokens"],
        tokens_per_s=r["tokens_per_s"],
        turn_id=r["id"],
    )
