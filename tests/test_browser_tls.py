"""Talking to it from another device, in a real headless Chromium.

Over HTTPS: `assistant serve --tls --host 0.0.0.0` with a login makes its self-signed
certificate; Chromium opens the page by the machine's `.local` name (mapped to the app with
`--host-resolver-rules`, so the page is not on a loopback name and only TLS makes it a secure
context) and is told to accept exactly that certificate's key (`--ignore-certificate-errors-
spki-list`). The page loads, the login works, a push-to-talk turn through the fake microphone
and a hands-free turn over `wss://` are answered.

Over plain HTTP on a name that is not loopback (`assistant.home`, mapped the same way; all of
127.0.0.0/8 would count as secure), the microphone controls say they need HTTPS and typed chat
works; on a secure page whose microphone the browser refuses, hands-free says so and turns off.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import socket
import ssl
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from assistant.devtools.launcher import running
from assistant.engine.embedded import free_port
from tests.app_proc import CLI_SERVE, App, app_env, run_app
from tests.chromium import AUTOPLAY, MICROPHONE, launch, needs_chromium
from tests.conftest import AUDIO
from tests.simengine_proc import run_simengine

pytestmark = needs_chromium
GRANT_MIC, FAKE_MIC = MICROPHONE  # the microphone allowed without asking; a fake one
USER, PASSWORD = "ann", "ann-phone-secret"
PHONE = {"width": 390, "height": 844}
RATE = 16000
HOSTNAME = socket.gethostname()
NAME = f"{HOSTNAME}.local" if "." not in HOSTNAME else HOSTNAME
"""How a phone on the network would name this machine; the certificate covers it."""
INSECURE_NAME = "assistant.home"


@dataclass
class TlsApp:
    url: str
    """As the phone opens it: https://<name>.local:PORT/"""
    port: int
    data_dir: Path
    log: Path

    @property
    def cert(self) -> Path:
        return self.data_dir / "tls" / "cert.pem"

    def trusted(self) -> ssl.SSLContext:
        """A client context that trusts only the app's own certificate."""
        return ssl.create_default_context(cafile=str(self.cert))


@contextlib.contextmanager
def run_tls_app(data_dir: Path, engine_url: str) -> Iterator[TlsApp]:
    """`assistant serve --tls` on every interface with a login, until its page answers over
    HTTPS with the certificate it made (checked against that certificate, for 127.0.0.1)."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, *CLI_SERVE, "--tls", "--host", "0.0.0.0", "--port", str(port)]
    env = app_env(data_dir, engine_url, ASSISTANT_AUTH=f"{USER}:{PASSWORD}")
    log = data_dir / "app.log"
    with running(cmd, env=env, cwd=data_dir, log=log, grace_s=20) as p:
        app = TlsApp(f"https://{NAME}:{port}/", port, data_dir, log)
        deadline = time.monotonic() + 180
        while True:
            if p.proc.poll() is not None:
                raise RuntimeError(f"the app exited ({p.proc.returncode}): {p.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the app did not answer over HTTPS: {p.output()}")
            if app.cert.exists() and "serving on https://" in p.output():
                with contextlib.suppress(httpx.HTTPError, ssl.SSLError, OSError):
                    url = f"https://127.0.0.1:{port}/"
                    if httpx.get(url, verify=app.trusted(), timeout=5).status_code == 200:
                        break
            time.sleep(0.3)
        yield app


def spki_pin(cert: Path) -> str:
    """The base64 SHA-256 of the certificate's public key, as Chromium's pin flag takes it."""
    key = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def mono16k(path: Path, channel: int | None = None) -> np.ndarray:
    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    x = data[:, channel] if channel is not None else data.mean(axis=1)
    n = int(len(x) * RATE / rate)
    x = np.interp(np.linspace(0, len(x) - 1, n), np.arange(len(x)), x).astype(np.float32)
    loud = np.flatnonzero(np.abs(x) > 0.02)  # trim the silence around the words
    return x[max(0, loud[0] - 1600) : loud[-1] + 1600]


def wav(path: Path, audio: np.ndarray) -> Path:
    """Chromium's fake capture reads only 16-bit WAV."""
    sf.write(str(path), (audio * 32767).astype(np.int16), RATE, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with run_simengine("--priority-policy", "--token-ms", "20") as url:
        yield url


@pytest.fixture(scope="module")
def tls_app(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsApp]:
    with run_tls_app(tmp_path_factory.mktemp("tls-app"), engine) as app:
        yield app


@pytest.fixture(scope="module")
def plain_app(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """Plain HTTP on loopback, with a login, behind a reverse proxy on this machine that the
    operator named (forwarded headers are believed from it only: docs/security.md)."""
    data = tmp_path_factory.mktemp("plain-app")
    auth = f"{USER}:{PASSWORD}"
    with run_app(
        data, engine, entry=CLI_SERVE, ASSISTANT_AUTH=auth, ASSISTANT_TRUSTED_PROXIES="127.0.0.1"
    ) as app:
        yield app


@pytest.fixture(scope="module")
def pw() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)
    with sync_playwright() as playwright:
        yield playwright


@contextlib.contextmanager
def chromium(pw: Any, *args: str, viewport: dict[str, int] | None = None) -> Iterator[Any]:
    """A fresh Chromium with a fake microphone and `args`; yields a page that records its page
    errors and the WebSockets it opens."""
    browser = launch(pw, FAKE_MIC, AUTOPLAY, *args)
    try:
        page = browser.new_page(viewport=viewport or {"width": 1400, "height": 1250})
        page.set_default_timeout(60_000)
        page.errors, page.sockets = [], []
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        page.on("websocket", lambda ws: page.sockets.append(ws.url))
        yield page
    finally:
        browser.close()


def phone_over_https(pw: Any, app: TlsApp, mic: Path) -> contextlib.AbstractContextManager:
    return chromium(
        pw,
        GRANT_MIC,
        f"--use-file-for-fake-audio-capture={mic}",
        f"--host-resolver-rules=MAP {NAME} 127.0.0.1",
        f"--ignore-certificate-errors-spki-list={spki_pin(app.cert)}",
        viewport=PHONE,
    )


def log_in(page: Any, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    page.get_by_label("username").fill(USER)
    page.get_by_label("password").fill(PASSWORD)
    page.get_by_role("button", name="Login").click()
    expect(page.locator("#chatbot")).to_be_visible()
    expect(page.locator("#banner")).not_to_contain_text("Loading the speech", timeout=120_000)


def type_a_turn(page: Any, text: str) -> None:
    from playwright.sync_api import expect

    page.get_by_placeholder("Type a message").fill(text)
    page.get_by_role("button", name="Send", exact=True).click()
    bot = page.locator("#chatbot [data-testid=bot]").last
    expect(bot).to_contain_text(f"You said: {text}")
    expect(bot).to_contain_text(re.compile(r"total \d+ ms"))


# ---- HTTPS ---------------------------------------------------------------------------------


def test_the_app_serves_the_certificate_whose_fingerprint_it_printed(tls_app):
    der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", tls_app.port)))
    served = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    log = tls_app.log.read_text()
    assert f"SHA-256 fingerprint: {served}" in log
    assert re.search(rf"open: https://\S+:{tls_app.port}/", log)
    assert f"serving on https://0.0.0.0:{tls_app.port}" in log
    cert = x509.load_pem_x509_certificate(tls_app.cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert NAME in san.get_values_for_type(x509.DNSName)
    # the page, the API and /metrics over TLS; login cookies never go out in the clear
    with httpx.Client(base_url=f"https://127.0.0.1:{tls_app.port}", verify=tls_app.trusted()) as c:
        assert c.get("/").status_code == 200
        assert c.get("/config").status_code == 401  # no login yet
        # added to a home screen, it opens full screen (the manifest needs no login)
        assert c.get("/manifest.json").json()["display"] == "standalone"
        # /metrics: to loopback scrapers (it has no login of its own), over TLS like the rest
        metrics = c.get("/metrics")
        assert metrics.status_code == 200 and "assistant_" in metrics.text
        r = c.post("/login", data={"username": USER, "password": PASSWORD})
        assert r.status_code == 200
        cookies = r.headers.get_list("set-cookie")
        assert len(cookies) == 2 and all("; Secure" in v for v in cookies), cookies
        assert c.get("/config").json().get("dependencies")  # logged in: the page's config
        assert c.get("/gradio_api/info").status_code == 200
    with pytest.raises(httpx.HTTPError):  # nothing is served in the clear on that port
        httpx.get(f"http://127.0.0.1:{tls_app.port}/", timeout=5)


def test_from_a_phone_over_https_login_a_spoken_turn_and_a_hands_free_turn(pw, tls_app, tmp_path):
    from playwright.sync_api import expect

    # push-to-talk: the JFK clip, looping, recorded for its length
    # (untrimmed: its own silence between the loops, as tests/test_browser.py plays it)
    data, rate = sf.read(str(AUDIO / "jfk.flac"), dtype="int16")
    jfk = tmp_path / "jfk.wav"
    sf.write(str(jfk), data, rate, subtype="PCM_16")
    with phone_over_https(pw, tls_app, jfk) as page:
        log_in(page, tls_app.url)
        assert page.evaluate("location.protocol") == "https:"
        assert page.evaluate("window.isSecureContext")
        expect(page.locator("#mic-notice")).to_be_hidden()  # nothing to warn about
        assert page.locator("meta[name=apple-mobile-web-app-capable]").count() == 1
        cookies = page.context.cookies()
        tokens = [c for c in cookies if c["name"].startswith("access-token")]
        assert len(tokens) == 2 and all(c["secure"] for c in tokens), tokens

        mic = page.locator("#mic")
        mic.locator("button.record-button").click()
        page.wait_for_timeout(11_000)
        mic.locator("button.stop-button").click()
        heard = page.locator("#chatbot [data-testid=user]").last
        # the loop may be anywhere in the clip when Record is pressed: its middle is heard
        expect(heard).to_contain_text("what your country can do for you")
        bot = page.locator("#chatbot [data-testid=bot]").last
        expect(bot).to_contain_text(re.compile(r"You said: .*your country can do for you"))
        expect(bot).to_contain_text(re.compile(r"stt \d+ ms.*total \d+ ms"))
        assert page.errors == []

    # hands-free: one request, then silence; the microphone streams over wss://
    words = mono16k(AUDIO / "stereo_diarization.wav", 1)  # "The horizon seems extremely distant."
    quiet = np.zeros(int(1.5 * RATE), dtype=np.float32)
    audio = np.concatenate([quiet, words, np.zeros(30 * RATE, dtype=np.float32)])
    horizon = wav(tmp_path / "horizon.wav", audio)
    with phone_over_https(pw, tls_app, Path(f"{horizon}%noloop")) as page:
        log_in(page, tls_app.url)
        page.locator("#handsfree button.call-button").click()  # start the call
        expect(page.locator("#handsfree-live")).to_contain_text("Listening")
        user = page.locator("#chatbot [data-testid=user]").last
        expect(user).to_contain_text("horizon", timeout=90_000)
        bot = page.locator("#chatbot [data-testid=bot]").last
        expect(bot).to_contain_text(re.compile(r"You said: The horizon"))
        expect(bot).to_contain_text(re.compile(r"total \d+ ms"), timeout=90_000)
        listen = [u for u in page.sockets if "/listen" in u]
        assert listen and all(u.startswith(f"wss://{NAME}:{tls_app.port}/") for u in listen)
        page.locator("#handsfree button.call-button").click()  # end the call
        assert page.wait_for_function("() => !window.assistantHandsFree.active()")
        assert page.errors == []


# ---- no secure context ---------------------------------------------------------------------


def test_over_plain_http_from_another_device_the_microphone_says_it_needs_https(pw, plain_app):
    from playwright.sync_api import expect

    port = plain_app.url.rstrip("/").rsplit(":", 1)[1]
    url = f"http://{INSECURE_NAME}:{port}/"
    with chromium(pw, GRANT_MIC, f"--host-resolver-rules=MAP {INSECURE_NAME} 127.0.0.1") as page:
        log_in(page, url)
        assert page.evaluate("window.isSecureContext") is False
        notice = page.locator("#mic-notice")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("The microphone needs HTTPS")
        expect(notice).to_contain_text("--tls")
        expect(notice).to_contain_text(f"https://{INSECURE_NAME}:{port}/")
        expect(notice).to_contain_text("open it on this machine")
        # Record says why, and pressing it anyway starts nothing
        record = page.locator("#mic button.record-button")
        expect(record).to_have_attribute("aria-disabled", "true")
        expect(record).to_have_attribute("title", re.compile("needs HTTPS"))
        record.click(force=True)
        page.wait_for_timeout(500)
        expect(page.locator("#mic button.stop-button")).to_be_hidden()
        expect(page.locator("#mic select.mic-select")).to_contain_text("needs HTTPS")
        # hands-free says why and does not stay switched on
        switch = page.locator("#handsfree button.call-button")
        switch.click()
        live = page.locator("#handsfree-live")
        expect(live).to_contain_text("the microphone needs HTTPS: start with --tls")
        expect(live).to_contain_text("open it on this machine")
        expect(page.locator("#handsfree")).to_have_attribute("data-state", "off")
        assert page.evaluate("window.assistantHandsFree.active()") is False
        # typing works
        type_a_turn(page, "hello from the sofa")
        assert page.errors == []  # no "Cannot read properties of undefined (getUserMedia)"


def test_a_refused_microphone_is_said_and_hands_free_turns_off(pw, plain_app):
    from playwright.sync_api import expect

    # loopback is a secure context; this browser denies every permission prompt
    with chromium(pw, "--deny-permission-prompts") as page:
        log_in(page, plain_app.url)
        assert page.evaluate("window.isSecureContext")
        switch = page.locator("#handsfree button.call-button")
        switch.click()
        live = page.locator("#handsfree-live")
        expect(live).to_contain_text("refused the microphone")
        expect(page.locator("#handsfree")).to_have_attribute("data-state", "off")
        expect(page.locator("#mic-notice")).to_contain_text("allow it for this site")
        assert page.evaluate("window.assistantHandsFree.active()") is False
        type_a_turn(page, "typing still works")
        assert page.errors == []


def test_behind_a_tls_proxy_login_cookies_are_secure(plain_app):
    """A proxy on the same machine that terminates TLS says so with X-Forwarded-Proto."""
    form = {"username": USER, "password": PASSWORD}
    proxied = httpx.post(
        plain_app.url + "login", data=form, headers={"X-Forwarded-Proto": "https"}, timeout=30
    )
    assert proxied.status_code == 200
    cookies = proxied.headers.get_list("set-cookie")
    # Secure, and SameSite=Lax however Gradio set it (docs/security.md)
    assert len(cookies) == 2 and all("; Secure" in c for c in cookies), cookies
    assert all(c.endswith("; SameSite=Lax") for c in cookies), cookies
    plain = httpx.post(plain_app.url + "login", data=form, timeout=30).headers.get_list(
        "set-cookie"
    )
    # over plain HTTP, Gradio's second copy stays usable (else no login could work there)
    assert any("unsecure" in c and "Secure" not in c.split(";", 1)[1] for c in plain), plain
