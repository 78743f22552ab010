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


def _bytes(*columns: str) -> str:
    """SQL for the UTF-8 bytes of `columns` together (a NULL counts 0)."""
    return " + ".join(f"COALESCE(length(CAST({c} AS BLOB)), 0)" for c in columns)


TURN_TEXT = ("user_text", "reply", "reasoning", "error", "timings", "offer")
JOB_TEXT = ("prompt", "result", "reasoning", "error")


def _m7_disk_usage(db: sqlite3.Connection) -> None:
    """Each login's stored bytes (its turns' and jobs' text), kept by triggers on every write
    whichever process writes (the app, its job worker, the command line), so the disk quota
    (`max_disk_bytes_per_user`) reads one row per turn instead of summing the login's whole
    history (issue 49, item 6)."""

    def turn(row: str) -> str:
        return _bytes(*(f"{row}.{c}" for c in TURN_TEXT))

    def job(row: str) -> str:
        return _bytes(*(f"{row}.{c}" for c in JOB_TEXT))

    def add(owner: str, amount: str) -> str:
        # an upsert from a SELECT needs its WHERE (SQLite's parser); a row of nobody's (a turn
        # whose conversation is gone) adds nothing
        return (
            f"INSERT INTO disk_usage (owner, bytes) SELECT o, {amount} FROM (SELECT {owner} AS o)"
            " WHERE o IS NOT NULL ON CONFLICT(owner) DO UPDATE SET bytes = bytes + excluded.bytes"
        )

    turn_owner = "(SELECT owner FROM conversations WHERE id = {}.conversation_id)"
    new_owner, old_owner = turn_owner.format("NEW"), turn_owner.format("OLD")
    turn_columns, job_columns = ", ".join(TURN_TEXT), ", ".join(JOB_TEXT)
    db.execute("CREATE TABLE disk_usage (owner TEXT PRIMARY KEY, bytes INTEGER NOT NULL)")
    db.execute(
        "INSERT INTO disk_usage (owner, bytes) SELECT owner, SUM(b) FROM ("
        f"SELECT c.owner AS owner, {turn('t')} AS b FROM turns t "
        "JOIN conversations c ON c.id = t.conversation_id "
        f"UNION ALL SELECT owner, {job('j')} FROM jobs j) GROUP BY owner"
    )
    turn_delta = f"({turn('NEW')}) - ({turn('OLD')})"
    job_delta = f"({job('NEW')}) - ({job('OLD')})"
    for sql in (
        f"CREATE TRIGGER turn_bytes_in AFTER INSERT ON turns BEGIN "
        f"{add(new_owner, turn('NEW'))}; END",
        f"CREATE TRIGGER turn_bytes_changed AFTER UPDATE OF {turn_columns} ON turns BEGIN "
        f"{add(new_owner, turn_delta)}; END",
        f"CREATE TRIGGER turn_bytes_out AFTER DELETE ON turns BEGIN "
        f"{add(old_owner, '-(' + turn('OLD') + ')')}; END",
        f"CREATE TRIGGER job_bytes_in AFTER INSERT ON jobs BEGIN "
        f"{add('NEW.owner', job('NEW'))}; END",
        f"CREATE TRIGGER job_bytes_changed AFTER UPDATE OF {job_columns} ON jobs BEGIN "
        f"{add('NEW.owner', job_delta)}; END",
        f"CREATE TRIGGER job_bytes_out AFTER DELETE ON jobs BEGIN "
        f"{add('OLD.owner', '-(' + job('OLD') + ')')}; END",
    ):
        db.execute(sql)


# Append only: a migration, once shipped, never changes. user_version counts those applied.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _m1_core,
    _m2_jobs,
    _m3_conversation_list,
    _m4_job_crashes,
    _m5_turn_offers,
    _m6_turn_dropped,
    _m7_disk_usage,
]
