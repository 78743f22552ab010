"""The store's schema: numbered migrations, applied in order, never changed once shipped."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


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


def _m3_conversation_list(db: sqlite3.Connection) -> None:
    """The page lists conversations by last activity, titled by their first request, and
    remembers each login's last conversation and voice settings (`prefs`)."""
    _script(
        db,
        """
        ALTER TABLE conversations ADD COLUMN updated_at REAL;
        UPDATE conversations SET updated_at = COALESCE(
            (SELECT MAX(t.created_at) FROM turns t WHERE t.conversation_id = conversations.id),
            created_at);
        UPDATE conversations SET title = COALESCE(substr(
            (SELECT t.user_text FROM turns t WHERE t.conversation_id = conversations.id
             ORDER BY t.id LIMIT 1), 1, 80), '') WHERE title = '';
        CREATE INDEX conversations_by_owner ON conversations(owner, updated_at);
        CREATE TABLE prefs (
            owner TEXT PRIMARY KEY,
            data TEXT NOT NULL DEFAULT '{}'
        )
        """,
    )


def _m4_job_crashes(db: sqlite3.Connection) -> None:
    """How many times a job was running when its worker died: a job that keeps taking the
    process down fails instead of being taken up again forever (issue 26)."""
    db.execute("ALTER TABLE jobs ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0")


def _m5_turn_offers(db: sqlite3.Connection) -> None:
    """The task a chat reply offered to take on ("Shall I draft the plan?"), so that "yes
    please" on the next turn starts that task as a job (issue 30)."""
    db.execute("ALTER TABLE turns ADD COLUMN offer TEXT")


def _m6_turn_dropped(db: sqlite3.Connection) -> None:
    """How many earlier turns a turn's request left out to fit the engine's context window, so
    the conversation says once, also when reopened, that they left the model's view (issue 48)."""
    db.execute("ALTER TABLE turns ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0")


# Append only: a migration, once shipped, never changes. user_version counts those applied.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _m1_core,
    _m2_jobs,
    _m3_conversation_list,
    _m4_job_crashes,
    _m5_turn_offers,
    _m6_turn_dropped,
]
