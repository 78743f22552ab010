"""The command line as a client of the running app.

`assistant serve`, once it listens, announces itself in its data directory (`app.json`: its
URL, its process id and start time, and a random secret made for this start; mode 0600, and
removed when it stops cleanly). `assistant chat` on the same data directory finds that file,
checks that its URL is this machine's loopback and that the announced process itself listens
there (before it sends anything: issue 49, another local program must not be handed the
secret and the message), checks the app answers with that secret, and sends the turn to the
app's
`/v1/chat/completions`: the same conversations, the same engine and the same worker, and the
answer as fast as any `/v1` client gets it. With no app (no file, or a stale one: the process
is gone, is another process, does not listen at the URL, or does not answer) the command runs
the turn itself as before; so it does where the system cannot show who listens (no /proc).

The secret is sent in `X-Assistant-Local`; the app takes it from loopback only, never from a
request a proxy forwarded, and only as the machine's own user, "local" (the CLI's owner when it
runs in-process too). Whoever can read the file can already read the store beside it.

Kept light (no Gradio, no Starlette): the CLI imports it before deciding where the turn runs.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

DISCOVERY_FILE = "app.json"
SECRET_HEADER = "x-assistant-local"
LOCAL_OWNER = "local"
"""Who the command line is: the machine's own user, in-process or through the app."""
PROBE_TIMEOUT_S = 3.0
"""How long the app gets to answer the check before the command runs the turn itself."""
READ_TIMEOUT_S = 180.0
"""The longest quiet spell in a reply (a deep job's reply sends a comment every 5 s)."""


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def process_start(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (Linux), so a recycled pid is not
    taken for the app; None where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def local_url(scheme: str, host: str, port: int) -> str:
    """The address this machine reaches the app at: loopback for a wildcard bind."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def announce(data_dir: Path, url: str, secret: str) -> Path:
    """Write the discovery file (mode 0600, replaced whole: a reader never sees half of it)."""
    path = data_dir / DISCOVERY_FILE
    tmp = data_dir / f".{DISCOVERY_FILE}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    record = {"url": url, "pid": os.getpid(), "started": process_start(os.getpid()),
              "secret": secret}  # fmt: skip
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o600)  # whatever the umask
    with os.fdopen(fd, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)
    return path


def withdraw(data_dir: Path, secret: str) -> None:
    """Remove the discovery file if it is still this start's (a newer app may have replaced
    it)."""
    path = data_dir / DISCOVERY_FILE
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("secret") == secret:
            path.unlink()


@dataclass(frozen=True)
class Announcement:
    url: str
    pid: int
    started: str | None
    secret: str


def read_announcement(data_dir: Path) -> Announcement | None:
    """The running app's announcement, or None: no file, one another user could have written
    or read, or one a process that is gone (or is not the app any more) left behind."""
    path = data_dir / DISCOVERY_FILE
    try:
        info = path.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None  # not ours alone: neither trusted nor used
        raw = json.loads(path.read_text())
        found = Announcement(str(raw["url"]), int(raw["pid"]), raw.get("started"),
                             str(raw["secret"]))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(found.pid, 0)
    except ProcessLookupError:
        return None  # killed: the file is stale
    except PermissionError:
        return None  # another user's process has the pid now
    if found.started is not None and process_start(found.pid) not in (None, found.started):
        return None  # the pid was recycled
    return found


def loopback_address(url: str) -> tuple[str, int] | None:
    """The loopback address and port of `http(s)://ADDRESS:PORT`; None for anything else (a
    name, which could resolve anywhere, another host, credentials, a path)."""
    try:
        u = urlsplit(url)
        host, port = u.hostname, u.port
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return None
    plain = not (u.username or u.password or u.query or u.fragment) and u.path in ("", "/")
    if u.scheme in ("http", "https") and port and plain and address.is_loopback:
        return str(address), port
    return None


def listens(pid: int, address: str, port: int) -> bool | None:
    """Whether process `pid` holds the socket listening at `address`:`port` (or at every
    address on that port) on this machine; None where /proc cannot tell."""
    if not Path("/proc/net/tcp").exists():
        return None
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or another user's: not the app
        return False
    held = set()
    for fd in fds:
        with contextlib.suppress(OSError):  # closed since (the listing's own, for one)
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    wanted = ipaddress.ip_address(address)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) < 10 or fields[3] != "0A":  # 0A: listening
                    continue
                where, _, at_port = fields[1].partition(":")
                bound = _proc_address(where)
                if (int(at_port, 16) == port and f"socket:[{fields[9]}]" in held
                        and bound is not None and _reaches(bound, wanted)):  # fmt: skip
                    return True
    return False


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _reaches(bound: Address, wanted: Address) -> bool:
    """Whether a socket bound at `bound` takes connections to `wanted`."""
    if bound == wanted or getattr(bound, "ipv4_mapped", None) == wanted:
        return True
    # every address: of its family, and IPv4's too for IPv6's (unless it is IPv6 only)
    return bound.is_unspecified and bound.version in (wanted.version, 6)


def _proc_address(hexed: str) -> Address | None:
    """An address as /proc/net/tcp* writes it: 32-bit words in the machine's byte order."""
    try:
        raw = bytes.fromhex(hexed)
    except ValueError:
        return None
    if sys.byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(raw) if len(raw) in (4, 16) else None


class AppError(Exception):
    """The app refused or failed the request: its status, message and error code."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@dataclass
class Reply:
    """A turn as the app answered it, in the CLI's `chat --json` shape."""

    reply: str = ""
    lane: str | None = None
    reason: str | None = None
    finish_reason: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    incomplete: bool = False
    job_id: str | None = None
    tokens: int = 0
    tokens_per_s: float | None = None
    conversation_id: str | None = None
    code: str | None = None
    """The API's error code (`budget_exhausted`: exit code 3)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "reply": self.reply,
            "lane": self.lane,
            "reason": self.reason,
            "finish_reason": self.finish_reason,
            "timings_ms": self.timings_ms,
            "error": self.error,
            "incomplete": self.incomplete,
            "job_id": self.job_id,
            "tokens": self.tokens,
            "tokens_per_s": self.tokens_per_s,
            "conversation_id": self.conversation_id,
        }


class RunningApp:
    """The app serving this data directory, reached at its loopback URL with its secret."""

    def __init__(self, found: Announcement):
        import httpx  # only once there is an app to talk to

        self.url = found.url.rstrip("/")
        self.headers = {SECRET_HEADER: found.secret}
        # the app is known by its process (pid and start time), not by a certificate: its
        # self-signed one names the host it serves, which need not be loopback's name
        self.http = httpx.Client(verify=False, headers=self.headers, trust_env=False)

    def close(self) -> None:
        self.http.close()

    def answers(self) -> bool:
        """The app answers, and takes this secret (a stale file's secret is refused)."""
        import httpx

        try:
            r = self.http.get(self.url + "/v1/models", timeout=PROBE_TIMEOUT_S)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def chat(
        self,
        text: str,
        *,
        conversation: str | None,
        deep: bool = False,
        on_text: Callable[[str], None] = lambda _: None,
    ) -> Reply:
        """One turn, streamed: `on_text` gets the answer as it arrives. `conversation`: an
        id, `latest` (the local user's most recently active one) or None (a new one); the app
        resolves it and carries its own history of it, as the page's turns do."""
        import httpx

        messages = [{"role": "user", "content": text}]
        body: dict[str, Any] = {"model": "assistant", "messages": messages, "stream": True,
                                "stream_options": {"include_usage": True}}  # fmt: skip
        if deep:  # the deep lane in this request, as `chat --deep` runs in-process
            body["reasoning_effort"] = "high"
        headers = {"x-assistant-history": "stored"}
        if conversation:
            headers["x-assistant-conversation"] = conversation
        timeout = httpx.Timeout(READ_TIMEOUT_S, connect=PROBE_TIMEOUT_S)
        out = Reply()
        try:
            with self.http.stream("POST", self.url + "/v1/chat/completions", json=body,
                                  headers=headers, timeout=timeout) as r:  # fmt: skip
                if r.status_code != 200:
                    r.read()
                    raise _refusal(r.status_code, r.text)
                out.lane = r.headers.get("x-assistant-lane")
                out.reason = unquote(r.headers.get("x-assistant-reason", "")) or None
                out.conversation_id = r.headers.get("x-assistant-conversation")
                out.job_id = r.headers.get("x-assistant-job")
                _read(_events(r.iter_lines()), out, on_text)
        except httpx.HTTPError as e:
            raise AppError(0, f"the app at {self.url} stopped answering: {e}") from e
        return out


def _refusal(status: int, text: str) -> AppError:
    try:
        error = json.loads(text)["error"]
        return AppError(status, str(error.get("message")), error.get("code"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return AppError(status, f"the app answered {status}: {text[:200]}")


def _events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if not line.startswith("data:"):
            continue  # blank lines and comments (a deep job's keep-alive)
        data = line[5:].strip()
        if data == "[DONE]":
            return
        with contextlib.suppress(ValueError):
            yield json.loads(data)


def _read(events: Iterator[dict[str, Any]], out: Reply, on_text: Callable[[str], None]) -> None:
    for event in events:
        if "error" in event:  # no answer came (reasoning may have): as the app said it
            error = event["error"] or {}
            out.error = str(error.get("message") or "the app gave no answer")
            out.code = error.get("code")
            if out.code == "budget_exhausted":
                out.finish_reason = "length"
            return
        if event.get("usage"):
            out.tokens = int(event["usage"].get("completion_tokens") or 0)
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                out.reply += piece
                on_text(piece)
        extra = event.get("assistant")
        if extra:
            out.lane = extra.get("lane") or out.lane
            out.reason = extra.get("reason") or out.reason
            out.finish_reason = extra.get("finish_reason")
            out.timings_ms = extra.get("timings_ms") or {}
            out.error = extra.get("error")
            out.incomplete = bool(extra.get("incomplete"))
            out.job_id = extra.get("job_id") or out.job_id
            out.conversation_id = extra.get("conversation_id") or out.conversation_id
    # the engine's rate as the app measured the turn: first token to last
    generating = out.timings_ms.get("llm_total", 0.0) - out.timings_ms.get("ttft", 0.0)
    if out.tokens > 1 and generating > 0:
        out.tokens_per_s = round((out.tokens - 1) / (generating / 1000), 2)


def find_app(data_dir: Path, note: Callable[[str], None] | None = None) -> RunningApp | None:
    """The app serving `data_dir` if one runs and answers, else None (run in-process).
    `note`: told why an announced app is not used."""
    found = read_announcement(data_dir)
    if found is None:
        return None
    # nothing is sent (the secret, the message) before the URL is known to be the app's
    address = loopback_address(found.url)
    if address is None:
        if note is not None:
            note(f"the discovery file names {found.url}, not this machine's loopback; "
                 "running here")  # fmt: skip
        return None
    if not listens(found.pid, *address):
        if note is not None:
            note(f"the app (pid {found.pid}) does not listen at {found.url}; running here")
        return None
    app = RunningApp(found)
    if app.answers():
        return app
    app.close()
    if note is not None:
        note(f"the app at {found.url} (pid {found.pid}) did not answer; running here")
    return None
