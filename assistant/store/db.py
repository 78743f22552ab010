"""The store: conversations, turns, jobs and per-login preferences in one SQLite file (WAL).

The schema and its migrations are in `schema`; the job queue's queries in `jobs`.
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

from assistant.datadir import make_private, make_private_dir, touch_private
from assistant.records import INTERRUPTED, ConversationInfo, StoredTurn, Timings, TurnResult
from assistant.store.jobs import JobRows
from assistant.store.schema import MIGRATIONS

PENDING = "the app stopped before this reply was complete"
"""What a started turn says until it ends: after a crash, that is what happened to it."""


class Store(JobRows):
    """One SQLite file. Thread-safe; every write is one short transaction."""

    def __init__(self, path: Path, clock: Callable[[], float] | None = None):
        make_private_dir(path.parent)
        # the conversations are the user's alone, whatever the umask: the file is made 0600
        # before SQLite opens it, which gives its -wal and -shm the same mode (issue 49)
        touch_private(path)
        for older in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            make_private(older)
        self.path = path
        if clock is not None:
            self.clock = clock
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

    def conversations(self, owner: str, limit: int = 100) -> list[ConversationInfo]:
        """`owner`'s conversations that have a turn, the most recently active first."""
        return self._summaries("c.owner=?", (owner, limit))

    def conversation(self, cid: str, owner: str) -> ConversationInfo | None:
        """One of `owner`'s conversations (None: not theirs, or no such one)."""
        found = self._summaries("c.id=? AND c.owner=?", (cid, owner, 1), any_turns=True)
        return found[0] if found else None

    def _summaries(
        self, where: str, args: tuple, *, any_turns: bool = False
    ) -> list[ConversationInfo]:
        rows = self._query(
            "SELECT c.id, c.title, COALESCE(c.updated_at, c.created_at) AS at, "
            "(SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS n "
            f"FROM conversations c WHERE {where}"
            + ("" if any_turns else " AND n > 0")
            + " ORDER BY at DESC, c.rowid DESC LIMIT ?",
            args,
        )
        return [ConversationInfo(r["id"], r["title"], r["at"], r["n"]) for r in rows]

    def rename_conversation(self, cid: str, owner: str, title: str) -> bool:
        with self.tx() as db:
            cur = db.execute(
                "UPDATE conversations SET title=? WHERE id=? AND owner=?", (title[:80], cid, owner)
            )
            return cur.rowcount == 1

    def delete_conversation(self, cid: str, owner: str) -> bool:
        """The conversation and its turns; jobs it delegated stay in the owner's Jobs list."""
        with self.tx() as db:
            if (
                db.execute(
                    "SELECT 1 FROM conversations WHERE id=? AND owner=?", (cid, owner)
                ).fetchone()
                is None
            ):
                return False
            db.execute("DELETE FROM turns WHERE conversation_id=?", (cid,))
            db.execute("DELETE FROM conversations WHERE id=?", (cid,))
            return True

    def start_turn(
        self, conversation_id: str, user_text: str, lane: str, reason: str, source: str = "text"
    ) -> int:
        """Store a turn as it starts (issue 26): if the process dies before it ends, the
        user's words and what had arrived (`save_partial`) stay, marked incomplete. `add_turn`
        with its id stores the turn's end over it."""
        pending = TurnResult("", lane, reason, INTERRUPTED, error=PENDING, incomplete=True)
        return self.add_turn(conversation_id, user_text, pending, source)

    def save_partial(self, turn_id: int, reply: str, reasoning: str) -> None:
        """What a started turn has produced so far."""
        with self.tx() as db:
            db.execute(
                "UPDATE turns SET reply=?, reasoning=? WHERE id=?", (reply, reasoning, turn_id)
            )

    def cut_reply(self, turn_id: int, reply: str) -> None:
        """A stopped turn's reply cut to what the person heard (the page reported playback):
        only ever shortened, so a late or repeated report cannot put unheard words back."""
        with self.tx() as db:
            db.execute(
                "UPDATE turns SET reply=? WHERE id=? AND incomplete=1 AND length(reply)>?",
                (reply, turn_id, len(reply)),
            )

    def add_turn(
        self,
        conversation_id: str,
        user_text: str,
        result: TurnResult,
        source: str = "text",
        turn_id: int | None = None,
    ) -> int:
        """Store a finished turn; with `turn_id` (from `start_turn`), over its pending row."""
        values = {
            "reply": result.reply,
            "reasoning": result.reasoning,
            "lane": result.lane,
            "reason": result.reason,
            "finish_reason": result.finish_reason,
            "incomplete": int(result.incomplete),
            "error": result.error,
            "timings": json.dumps(result.timings.as_dict()),
            "tokens": result.tokens,
            "tokens_per_s": result.tokens_per_s,
            "job_id": result.job_id,
            "offer": result.offer,
            "dropped": result.dropped,
        }
        with self.tx() as db:
            updated = turn_id is not None and (
                db.execute(
                    f"UPDATE turns SET {', '.join(f'{k}=?' for k in values)} WHERE id=?",
                    (*values.values(), turn_id),
                ).rowcount
                == 1
            )
            if not updated:  # new, or its pending row went with its conversation
                columns = {"conversation_id": conversation_id, "created_at": time.time(),
                           "source": source, "user_text": user_text, **values}  # fmt: skip
                cur = db.execute(
                    f"INSERT INTO turns ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})",
                    tuple(columns.values()),
                )
                turn_id = int(cur.lastrowid or 0)
            # the list is ordered by activity and titled by the first request
            db.execute(
                "UPDATE conversations SET updated_at=?, "
                "title=CASE WHEN title='' THEN ? ELSE title END WHERE id=?",
                (time.time(), user_text[:80], conversation_id),
            )
            return int(turn_id or 0)

    def turns(self, conversation_id: str) -> list[tuple[str, TurnResult]]:
        """(what the user said, the result) per turn, oldest first."""
        return [(t.user_text, t.result) for t in self.transcript(conversation_id)]

    def transcript(self, conversation_id: str) -> list[StoredTurn]:
        rows = self._query(
            "SELECT * FROM turns WHERE conversation_id=? ORDER BY id", (conversation_id,)
        )
        return [
            StoredTurn(r["user_text"], r["source"], _turn_from_row(r), r["created_at"])
            for r in rows
        ]

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

    # per-login preferences: the last conversation, the voice and its rate

    def disk_bytes(self, owner: str) -> int:
        """The bytes of `owner`'s stored turns and jobs (their text), kept by the store's
        triggers: one row read, whatever the history's length (`max_disk_bytes_per_user`)."""
        rows = self._query("SELECT bytes FROM disk_usage WHERE owner=?", (owner,))
        return int(rows[0][0]) if rows else 0

    def prefs(self, owner: str) -> dict[str, Any]:
        rows = self._query("SELECT data FROM prefs WHERE owner=?", (owner,))
        return dict(json.loads(rows[0]["data"])) if rows else {}

    def set_prefs(self, owner: str, **changes: Any) -> dict[str, Any]:
        """Merge `changes` into `owner`'s preferences (None removes a key); returns them."""
        with self.tx() as db:
            row = db.execute("SELECT data FROM prefs WHERE owner=?", (owner,)).fetchone()
            data = dict(json.loads(row["data"])) if row else {}
            data.update(changes)
            data = {k: v for k, v in data.items() if v is not None}
            db.execute(
                "INSERT INTO prefs (owner, data) VALUES (?, ?) "
                "ON CONFLICT(owner) DO UPDATE SET data=excluded.data",
                (owner, json.dumps(data)),
            )
            return data


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
        offer=r["offer"],
        dropped=r["dropped"],
    )
