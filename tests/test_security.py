"""Security at the edge, through the running app: exposure, isolation between users, limits.

The app runs as a real process with a login for four users; requests go over real HTTP, the
way a browser, `gradio_client` or an attacker would send them.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from gradio_client import Client, handle_file

from assistant.settings import Settings
from assistant.store.db import Store
from assistant.web.edge.security import LoginThrottle, blocked_paths, launch_options, same_origin
from tests.app_proc import App, run_app
from tests.conftest import AUDIO
from tests.page_session import PageSession
from tests.simengine_proc import root_url, run_simengine

USERS = {"ann": "pw-ann-1", "bob": "pw-bob-1", "cat": "pw-cat-1", "zed": "pw-zed-1"}
AUTH = ",".join(f"{u}:{p}" for u, p in USERS.items())
MAX_TEXT = 2000
MAX_UPLOAD = 2_000_000
LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # /proc/net/tcp{,6} spelling
ANY = {"00000000", "00000000000000000000000000000000"}


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    # chat is quick; a deep job reasons for about 30 s, so jobs stay queued or running
    with run_simengine("--token-ms", "10", "--reasoning-tokens", "3000") as url:
        yield url


@pytest.fixture(scope="module")
def uploads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gradio's upload folder for the app (GRADIO_TEMP_DIR), so tests can look inside."""
    return tmp_path_factory.mktemp("uploads")


@pytest.fixture(scope="module")
def app(sim: str, uploads: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    data = tmp_path_factory.mktemp("guarded")
    (data / "assistant.toml").write_text(
        f"max_jobs_per_user = 2\nmax_text_chars = {MAX_TEXT}\nmax_upload_bytes = {MAX_UPLOAD}\n"
    )
    with run_app(data, sim, ASSISTANT_AUTH=AUTH, GRADIO_TEMP_DIR=str(uploads)) as running:
        yield running


@pytest.fixture(scope="module")
def ann(app: App) -> Client:
    return Client(app.url, auth=("ann", USERS["ann"]), verbose=False)


@pytest.fixture(scope="module")
def bob(app: App) -> Client:
    return Client(app.url, auth=("bob", USERS["bob"]), verbose=False)


def logged_in(app: App, user: str) -> httpx.Client:
    http = httpx.Client(base_url=app.url.rstrip("/"), timeout=30)
    http.post("/login", data={"username": user, "password": USERS[user]}).raise_for_status()
    return http


def raw_get(url: str, target: str, cookies: httpx.Cookies | None = None) -> tuple[int, bytes]:
    """GET `target` byte for byte: no client-side cleaning of `../`, `//` or `%2e`."""
    u = urlsplit(url)
    cookie = "; ".join(f"{k}={v}" for k, v in (cookies or {}).items())
    request = f"GET {target} HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\n"
    request += f"Cookie: {cookie}\r\n\r\n" if cookie else "\r\n"
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(request.encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def listening(port: int) -> set[str]:
    """The local addresses a TCP port listens on, as /proc/net/tcp spells them."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, state = fields[1], fields[3]
            ip, _, hex_port = address.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(ip)
    return found


def files_under(folder: Path) -> list[bytes]:
    return [p.read_bytes() for p in folder.rglob("*") if p.is_file()]


# exposure: where it listens, how it launches


def test_listens_on_loopback_only_by_default(app):
    addresses = listening(urlsplit(app.url).port)
    assert addresses and addresses <= LOOPBACK, addresses


def test_a_public_address_needs_a_login_and_then_demands_it(sim, tmp_path):
    with run_app(tmp_path / "public", sim, "--host", "0.0.0.0", ASSISTANT_AUTH=AUTH) as running:
        assert listening(urlsplit(running.url).port) & ANY  # it did bind the public address
        anonymous = httpx.get(running.url + "gradio_api/info", timeout=10)
        assert anonymous.status_code == 401
        with pytest.raises(Exception):  # noqa: B017 - any refusal will do
            Client(running.url, verbose=False)
        client = Client(running.url, auth=("bob", USERS["bob"]), verbose=False)
        assert client.predict(api_name="/jobs") == []


def test_launch_options_keep_the_risky_features_off(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", auth=(("ann", "pw"),), max_upload_bytes=123)
    options = launch_options(settings)
    assert options["share"] is False and options["ssr_mode"] is False
    assert options["run_history"] is False and options["mcp_server"] is False
    assert options["strict_cors"] is True and options["max_file_size"] == 123
    assert options["auth"] == [("ann", "pw")]
    assert options["blocked_paths"] == [str((tmp_path / "data").resolve())]


def test_a_data_dir_holding_gradios_folders_blocks_the_store_files(tmp_path, monkeypatch):
    # blocking /tmp whole would stop Gradio serving its own uploads: block the store instead
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "cache" / "gradio"))
    blocked = blocked_paths(Settings(data_dir=tmp_path / "cache"))
    db = str((tmp_path / "cache" / "assistant.db").resolve())
    assert blocked == [db, db + "-wal", db + "-shm"]


def test_run_history_is_off_in_the_running_app(app):
    http = logged_in(app, "ann")
    assert http.get("/config").json()["run_history"] is False
    assert http.get("/gradio_api/runs").status_code == 404


# exposure: the file route


TRAVERSALS = [
    "/gradio_api/file=/etc/passwd",
    "/file=/etc/passwd",
    "/gradio_api/file=%2Fetc%2Fpasswd",
    "/gradio_api/file=../../../../etc/passwd",
    "/gradio_api/file=..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "/gradio_api/file=%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/gradio_api/file=/tmp/gradio/../../etc/passwd",
    "/gradio_api/file/etc/passwd",
    "/gradio_api/file//etc/passwd",
    "/static/../../../../etc/passwd",
    "/static//etc/passwd",
    "/assets/..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/gradio_api/file={uploads}/../../../../../../etc/passwd",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_the_file_route_serves_nothing_outside_the_apps_files(app, uploads, target):
    assert "root:" in Path("/etc/passwd").read_text()  # there is something to steal
    http = logged_in(app, "ann")  # even a logged-in user gets nothing
    status, body = raw_get(app.url, target.format(uploads=uploads), http.cookies)
    assert b"root:" not in body
    assert status in (400, 403, 404), (status, body[:200])


@pytest.mark.parametrize("name", ["assistant.db", "assistant.db-wal", "assistant.toml", "app.log"])
def test_the_store_cannot_be_downloaded(app, ann, name):
    ann.predict("something to store", api_name="/chat")
    assert (app.data_dir / name).exists()
    http = logged_in(app, "ann")
    path = app.data_dir / name
    for target in (f"/gradio_api/file={path}", f"/gradio_api/file/{path}"):
        status, body = raw_get(app.url, target, http.cookies)
        assert status == 403, (target, status)
        assert b"SQLite format 3" not in body and b"max_jobs_per_user" not in body


def test_the_apps_own_files_are_still_served(app):
    # the control for the refusals above: the route works for what the app itself stores
    http = logged_in(app, "ann")
    r = http.post("/gradio_api/upload", files={"files": ("mine.txt", b"my own words")})
    path = r.json()[0]
    served = http.get(f"/gradio_api/file={path}")
    assert served.status_code == 200 and served.content == b"my own words"


def test_the_store_stays_blocked_inside_gradios_upload_folder(sim, tmp_path):
    # without blocked paths, a data dir inside GRADIO_TEMP_DIR would be served as "uploads"
    cache = tmp_path / "cache"
    data = cache / "data"
    with run_app(data, sim, GRADIO_TEMP_DIR=str(cache)) as running:
        Client(running.url, verbose=False).predict("hello", api_name="/chat")
        status, body = raw_get(running.url, f"/gradio_api/file={data / 'assistant.db'}")
        assert status == 403 and b"SQLite format 3" not in body
        http = httpx.Client(base_url=running.url.rstrip("/"), timeout=30)
        path = http.post("/gradio_api/upload", files={"files": ("ok.txt", b"fine")}).json()[0]
        assert Path(path).is_relative_to(cache)
        assert http.get(f"/gradio_api/file={path}").content == b"fine"


def test_urls_are_not_fetched_on_the_callers_behalf(app, sim):
    http = logged_in(app, "ann")
    for url in (f"{sim}/models", f"{root_url(sim)}/sim/requests", "http://169.254.169.254/"):
        r = http.get(f"/gradio_api/file={url}")
        assert r.status_code == 403, (url, r.status_code)
        assert b"sim-model" not in r.content


def test_without_a_login_nothing_is_served(app):
    anonymous = httpx.Client(base_url=app.url.rstrip("/"), timeout=10)
    assert anonymous.get("/gradio_api/info").status_code == 401
    upload = anonymous.post("/gradio_api/upload", files={"files": ("x.txt", b"x")})
    assert upload.status_code == 401
    jobs = anonymous.post("/gradio_api/call/jobs", json={"data": []})
    assert jobs.status_code == 401


# exposure: requests from other sites


def test_a_cross_origin_upload_is_refused_and_stores_nothing(app, uploads):
    http = logged_in(app, "ann")
    secret = f"cross-site payload {time.time_ns()}".encode()
    for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example"):
        r = http.post(
            "/gradio_api/upload", files={"files": ("x.txt", secret)}, headers={"Origin": origin}
        )
        assert r.status_code == 403, (origin, r.status_code)
        assert "access-control-allow-origin" not in r.headers
    assert secret not in files_under(uploads)
    # the page itself (same origin) still uploads
    same = http.post(
        "/gradio_api/upload", files={"files": ("x.txt", secret)}, headers={"Origin": app.url[:-1]}
    )
    assert same.status_code == 200 and Path(same.json()[0]).read_bytes() == secret


def test_other_sites_cannot_log_in_or_queue_calls(app):
    evil = {"Origin": "http://evil.example"}
    anonymous = httpx.Client(base_url=app.url.rstrip("/"), timeout=10)
    form = {"username": "ann", "password": USERS["ann"]}
    login = anonymous.post("/login", data=form, headers=evil)
    assert login.status_code == 403 and not anonymous.cookies
    http = logged_in(app, "ann")
    body = {"data": [], "fn_index": 0, "session_hash": "x"}
    join = http.post("/gradio_api/queue/join", json=body, headers=evil)
    assert join.status_code == 403
    preflight = http.options(
        "/gradio_api/upload", headers={**evil, "Access-Control-Request-Method": "POST"}
    )
    # Gradio's CORS layer answers preflights itself; without an allowed origin in the
    # answer the browser never sends the request
    assert "access-control-allow-origin" not in preflight.headers


@pytest.mark.parametrize(
    ("origin", "host", "same"),
    [("http://127.0.0.1:7860", "127.0.0.1:7860", True),
     ("http://LOCALHOST:7860", "localhost:7860", True),
     ("https://chat.example.org", "chat.example.org", True),
     ("https://chat.example.org", "chat.example.org:443", True),
     ("http://chat.example.org", "chat.example.org:443", False),
     ("http://localhost:7861", "localhost:7860", False),
     ("http://evil.example", "127.0.0.1:7860", False),
     ("null", "127.0.0.1:7860", False),
     ("http://[::1]:7860", "[::1]:7860", True),
     ("file://", "127.0.0.1:7860", False),
     ("http://127.0.0.1:99999", "127.0.0.1:7860", False),
     ("http://127.0.0.1:7860", None, False)],
)  # fmt: skip
def test_same_origin(origin, host, same):
    assert same_origin(origin, host) is same


# exposure: login throttling


def test_failed_logins_are_throttled_per_user_and_address(app):
    http = httpx.Client(base_url=app.url.rstrip("/"), timeout=10)
    wrong = {"username": "zed", "password": "guess"}
    statuses = [http.post("/login", data=wrong).status_code for _ in range(5)]
    assert statuses == [400] * 5
    blocked = http.post("/login", data=wrong)
    assert blocked.status_code == 429 and 0 < int(blocked.headers["retry-after"]) <= 61
    # locked means locked: the right password waits too (else guessing just goes on)
    right = http.post("/login", data={"username": "zed", "password": USERS["zed"]})
    assert right.status_code == 429 and not http.cookies
    # another user from the same address is not locked out by zed's failures
    bob = http.post("/login", data={"username": "bob", "password": USERS["bob"]})
    assert bob.status_code == 200


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttle_window_lockout_and_success():
    clock = Clock()
    t = LoginThrottle(
        max_failures=3, max_client_failures=99, window_s=60, lockout_s=30, clock=clock
    )
    for _ in range(2):
        t.failed("ann", "10.0.0.1")
    clock.now += 61  # those two fell out of the window
    t.failed("ann", "10.0.0.1")
    assert t.retry_after("ann", "10.0.0.1") == 0
    t.failed("ann", "10.0.0.1")
    t.failed("ann", "10.0.0.1")
    assert t.retry_after("ann", "10.0.0.1") == pytest.approx(30)
    assert t.retry_after("ann", "10.0.0.2") == 0  # another address is not locked out
    clock.now += 31
    assert t.retry_after("ann", "10.0.0.1") == 0
    t.failed("ann", "10.0.0.1")
    t.succeeded("ann", "10.0.0.1")  # a success forgets that user's failures
    t.failed("ann", "10.0.0.1")
    t.failed("ann", "10.0.0.1")
    assert t.retry_after("ann", "10.0.0.1") == 0


def test_throttle_counts_many_user_names_from_one_address():
    clock = Clock()
    t = LoginThrottle(max_failures=3, max_client_failures=5, clock=clock)
    for name in "abcde":
        t.failed(name, "10.0.0.9")
    assert t.retry_after("someone-else", "10.0.0.9") > 0
    assert t.retry_after("someone-else", "10.0.0.8") == 0


def test_throttle_memory_is_bounded(monkeypatch):
    monkeypatch.setattr("assistant.web.edge.throttle.MAX_TRACKED", 100)
    t = LoginThrottle()
    for i in range(1000):
        t.failed(f"user{i}", f"10.0.{i // 250}.{i % 250}")
    assert len(t._failures) <= 100


# isolation between users


def test_a_conversation_belongs_to_its_user(app, ann, bob):
    first = ann.predict("ann's private question", api_name="/chat")
    cid = first["conversation_id"]
    with pytest.raises(Exception, match=f"no conversation {cid}"):
        bob.predict("let me in", cid, api_name="/chat")
    again = ann.predict("ann continues", cid, api_name="/chat")
    assert again["conversation_id"] == cid and again["error"] is None
    store = Store(app.data_dir / "assistant.db")
    try:
        assert store.conversation_owner(cid) == "ann"
        assert [u for u, _ in store.turns(cid)] == ["ann's private question", "ann continues"]
        assert cid not in {c["id"] for c in store.conversations("bob")}
    finally:
        store.close()


def test_jobs_are_listed_and_keyed_per_user(ann, bob):
    job = ann.predict("ann's deep task", "same-key", api_name="/delegate")
    assert job["owner"] == "ann"
    assert job["id"] in {j["id"] for j in ann.predict(api_name="/jobs")}
    assert job["id"] not in {j["id"] for j in bob.predict(api_name="/jobs")}
    # the same idempotency key from another user is another job, not ann's
    bobs = bob.predict("bob's deep task", "same-key", api_name="/delegate")
    assert bobs["id"] != job["id"] and bobs["owner"] == "bob"
    assert all(j["owner"] == "bob" for j in bob.predict(api_name="/jobs"))


def test_the_page_cannot_show_cancel_or_retry_another_users_job(app, ann):
    job = ann.predict("ann's job that bob wants", api_name="/delegate")
    jid = job["id"]
    store = Store(app.data_dir / "assistant.db")
    bob_page = PageSession(app.url, auth=("bob", USERS["bob"]))
    ann_page = PageSession(app.url, auth=("ann", USERS["ann"]))
    try:
        listed = bob_page.call("refresh", None)
        assert listed.ok and jid not in json.dumps(listed.data)
        shown = bob_page.call("show", jid)
        assert not shown.ok or jid not in json.dumps(shown.data)
        assert not bob_page.call("cancel", jid).ok
        assert not bob_page.call("retry", jid).ok
        assert store.job(jid).state in ("queued", "running")
        # the same calls from ann work: the refusals above were about bob, not the calls
        assert jid in json.dumps(ann_page.call("refresh", None).data)
        own = ann_page.call("show", jid)
        assert own.ok and "ann's job that bob wants" in json.dumps(own.data)
        assert ann_page.call("cancel", jid).ok
        assert store.job(jid).state == "cancelled"
        assert not bob_page.call("retry", jid).ok
        assert store.job(jid).state == "cancelled"
        assert ann_page.call("retry", jid).ok
        assert store.job(jid).state in ("queued", "running")
    finally:
        bob_page.close()
        ann_page.close()
        store.close()


# limits


def test_the_per_user_job_limit_is_a_clear_message(app):
    cat = Client(app.url, auth=("cat", USERS["cat"]), verbose=False)
    first = cat.predict("cat task one", "cat-1", api_name="/delegate")
    cat.predict("cat task two", "cat-2", api_name="/delegate")
    with pytest.raises(Exception, match="you already have 2 jobs queued or running"):
        cat.predict("cat task three", "cat-3", api_name="/delegate")
    # asking again for a job already made is not a new job: it is answered, not refused
    assert cat.predict("cat task one", "cat-1", api_name="/delegate")["id"] == first["id"]
    assert len(cat.predict(api_name="/jobs")) == 2
    # the limit is per user: bob (one job at most so far) can still delegate
    other = Client(app.url, auth=("bob", USERS["bob"]), verbose=False)
    assert other.predict("bob is not limited by cat", api_name="/delegate")["owner"] == "bob"


def test_text_length_is_capped_through_the_api(app, bob):
    store = Store(app.data_dir / "assistant.db")
    try:
        before = len(store.conversations("bob"))
        too_long = "x" * (MAX_TEXT + 1)
        message = f"too long \\({MAX_TEXT + 1} characters; the limit is {MAX_TEXT}\\)"
        with pytest.raises(Exception, match=message):
            bob.predict(too_long, api_name="/chat")
        with pytest.raises(Exception, match=message):
            bob.predict(too_long, api_name="/delegate")
        assert len(store.conversations("bob")) == before  # nothing half-made was stored
        at_limit = bob.predict("y" * MAX_TEXT, api_name="/chat")
        assert at_limit["error"] is None and at_limit["reply"].startswith("You said: yyy")
    finally:
        store.close()


def test_uploads_over_the_cap_are_refused(app, uploads, ann, tmp_path):
    http = logged_in(app, "ann")
    big = b"\0" * (MAX_UPLOAD + 1)
    r = http.post("/gradio_api/upload", files={"files": ("big.wav", big)})
    assert r.status_code == 413
    assert big not in files_under(uploads)
    path = tmp_path / "big.wav"
    path.write_bytes(big)
    with pytest.raises(Exception):  # noqa: B017 - gradio_client's upload error
        ann.predict(handle_file(str(path)), api_name="/transcribe")
    # the app keeps serving: a real recording under the cap is transcribed
    ok = ann.predict(handle_file(str(AUDIO / "jfk.flac")), api_name="/transcribe")
    assert "fellow americans" in ok["text"].lower()


def test_the_handsfree_stream_needs_the_login_and_the_same_origin(app):
    import asyncio

    import httpx
    import websockets

    url = app.url.replace("http://", "ws://") + "listen"
    login = httpx.post(app.url + "login", data={"username": "ann", "password": USERS["ann"]})
    cookie = "; ".join(f"{k}={v}" for k, v in login.cookies.items())
    host = app.url.split("//")[1].rstrip("/")

    async def attempt(headers: dict[str, str]) -> str:
        try:
            async with websockets.connect(url, additional_headers=headers) as ws:
                await ws.send(bytes(3200))  # 100 ms of silence: heard, nothing said back
                try:
                    reply = await asyncio.wait_for(ws.recv(), timeout=1.0)
                except TimeoutError:
                    return "open"
                return f"said {reply!r}"
        except websockets.exceptions.InvalidStatus as e:
            return f"refused {e.response.status_code}"
        except websockets.exceptions.ConnectionClosed as e:
            return f"closed {e.rcvd.code if e.rcvd else None}"

    assert asyncio.run(attempt({})) == "refused 401"  # no login: no microphone stream
    assert asyncio.run(attempt({"Cookie": cookie, "Origin": "http://evil.example"})) == (
        "refused 403"  # another site's page cannot open it with the user's cookie
    )
    assert asyncio.run(attempt({"Cookie": cookie, "Origin": f"http://{host}"})) == "open"
