"""HTTPS settings and certificates: the self-signed one made once and reused, given PEM files
checked with a one-line error, Secure login cookies over TLS (`assistant.web.edge.tls`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from assistant.errors import ConfigError
from assistant.settings import load_settings
from assistant.web.edge import tls
from assistant.web.edge.tls import SecureCookies, secure_cookie

NAMES = ["localhost", "phone-box", "phone-box.local", "127.0.0.1", "::1", "192.168.1.20"]


def sans(cert_path: Path) -> tuple[list[str], list[str]]:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.DNSName), [
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)
    ]


def der_sha256(cert_path: Path) -> str:
    der = ssl.PEM_cert_to_DER_cert(cert_path.read_text())
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def test_the_self_signed_certificate_covers_the_names_and_is_reused(tmp_path):
    first = tls.self_signed(tmp_path / "tls", NAMES)
    assert first.made and first.why_made == "there was none"
    dns, ips = sans(first.cert)
    assert dns == ["localhost", "phone-box", "phone-box.local"]
    assert ips == ["127.0.0.1", "::1", "192.168.1.20"]
    assert first.fingerprint == der_sha256(first.cert)  # what a browser's viewer shows
    assert len(first.fingerprint.split(":")) == 32
    assert (first.key.stat().st_mode & 0o777) == 0o600  # the private key is the owner's only
    # what the server does with the pair works
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(first.cert, first.key)
    cert = x509.load_pem_x509_certificate(first.cert.read_bytes())
    assert cert.issuer == cert.subject
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca

    again = tls.self_signed(tmp_path / "tls", NAMES[:3])  # a second start: the same one
    assert not again.made
    assert again.fingerprint == first.fingerprint
    assert again.cert.read_bytes() == first.cert.read_bytes()


def test_a_new_address_makes_a_new_certificate_that_keeps_the_old_names(tmp_path):
    first = tls.self_signed(tmp_path, NAMES)
    second = tls.self_signed(tmp_path, ["localhost", "10.0.0.7"])
    assert second.made and "10.0.0.7" in second.why_made
    assert second.fingerprint != first.fingerprint
    _, ips = sans(second.cert)
    assert "10.0.0.7" in ips and "192.168.1.20" in ips  # a phone that used the old one still can


def test_an_expiring_or_broken_certificate_is_made_again(tmp_path):
    first = tls.self_signed(tmp_path, NAMES)
    later = first.not_after - dt.timedelta(days=tls.RENEW_DAYS - 1)
    renewed = tls.self_signed(tmp_path, NAMES, now=lambda: later)
    assert renewed.made and "expires" in renewed.why_made
    assert renewed.not_after > first.not_after

    (tmp_path / "cert.pem").write_text("not a certificate")
    remade = tls.self_signed(tmp_path, NAMES)
    assert remade.made and "unusable" in remade.why_made
    assert remade.fingerprint == der_sha256(remade.cert)


def test_a_data_directory_it_cannot_write_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match="cannot write the TLS certificate"):
        tls.self_signed(blocker / "tls", NAMES)


def test_the_machine_names_cover_loopback_the_host_name_and_a_given_host():
    names = tls.machine_names("192.0.2.99")
    assert {"localhost", "127.0.0.1", "::1", "192.0.2.99"} <= set(names)
    import socket

    assert socket.gethostname() in names
    everything = tls.machine_names("0.0.0.0")  # every interface's own addresses
    assert "127.0.0.1" in everything
    assert all(not n.startswith("fe80") for n in everything)  # link-local: not in a URL


def test_the_urls_to_open_name_other_machines_first():
    names = ["localhost", "box", "box.local", "127.0.0.1", "::1", "192.168.1.20", "fd00::2"]
    v4 = tls.urls_to_open("0.0.0.0", 7860, names)
    assert v4[0] == "https://192.168.1.20:7860/"
    assert "https://[fd00::2]:7860/" not in v4  # 0.0.0.0 does not listen on IPv6
    assert v4[-1] == "https://localhost:7860/"
    assert "https://[fd00::2]:7860/" in tls.urls_to_open("::", 7860, names)
    assert tls.urls_to_open("192.168.1.20", 8443, names) == ["https://192.168.1.20:8443/"]


def test_describe_prints_the_fingerprint_and_where_to_open_it(tmp_path):
    cert = tls.self_signed(tmp_path / "tls", ["localhost", "127.0.0.1", "192.168.1.20"])
    lines = "\n".join(tls.describe(cert, "0.0.0.0", 7860))
    assert f"SHA-256 fingerprint: {cert.fingerprint}" in lines
    assert "https://192.168.1.20:7860/" in lines and str(cert.cert) in lines
    assert "made a self-signed certificate" in lines
    local = "\n".join(tls.describe(cert, "127.0.0.1", 7860))
    assert "this machine only" in local


# ---- given PEM files -----------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> tls.Certificate:
    return tls.self_signed(tmp_path / "given", ["localhost", "127.0.0.1"])


def test_given_files_are_checked_and_served(pair):
    loaded = tls.server_certificate(pair.cert, pair.key, False, Path("/nonexistent"), "0.0.0.0")
    assert loaded is not None and loaded.fingerprint == pair.fingerprint and not loaded.made
    assert tls.server_certificate(None, None, False, Path("/nonexistent"), "0.0.0.0") is None


def test_bad_files_are_refused_with_one_line(tmp_path, pair):
    junk = tmp_path / "junk.pem"
    junk.write_text("hello")
    other = tls.self_signed(tmp_path / "other", ["localhost"])
    encrypted = tmp_path / "encrypted.pem"
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    cases = [
        (junk, pair.key, "is not a PEM certificate"),
        (pair.cert, junk, "is not a PEM private key"),
        (pair.cert, encrypted, "is encrypted"),
        (pair.cert, other.key, "is not the key of the certificate"),
        (pair.key, pair.key, "is not a PEM certificate"),  # the two swapped
        (tmp_path / "missing.pem", pair.key, "cannot read it"),
    ]
    for cert, key, message in cases:
        with pytest.raises(ConfigError, match=message) as info:
            tls.load_certificate(cert, key)
        assert "\n" not in str(info.value)


def test_settings_take_both_files_or_neither(tmp_path, pair):
    none = tmp_path / "none.toml"
    s = load_settings(
        env={"ASSISTANT_TLS_CERT": str(pair.cert), "ASSISTANT_TLS_KEY": str(pair.key)},
        toml_path=none,
    )
    assert (s.tls_cert, s.tls_key) == (pair.cert, pair.key)
    assert load_settings(env={}, toml_path=none).tls_cert is None
    with pytest.raises(ConfigError, match="ASSISTANT_TLS_CERT is set but ASSISTANT_TLS_KEY"):
        load_settings(env={"ASSISTANT_TLS_CERT": str(pair.cert)}, toml_path=none)
    with pytest.raises(ConfigError, match="ASSISTANT_TLS_KEY is set but ASSISTANT_TLS_CERT"):
        load_settings(env={"ASSISTANT_TLS_KEY": str(pair.key)}, toml_path=none)
    missing = {"ASSISTANT_TLS_CERT": str(tmp_path / "nope.pem"), "ASSISTANT_TLS_KEY": str(pair.key)}
    with pytest.raises(ConfigError, match="no such file"):
        load_settings(env=missing, toml_path=none)
    toml = tmp_path / "assistant.toml"
    toml.write_text(f'tls_cert = "{pair.cert}"\ntls_key = "{pair.key}"\n')
    assert load_settings(env={}, toml_path=toml).tls_key == pair.key


def test_serve_with_bad_tls_files_exits_1_with_one_line(tmp_path, pair, monkeypatch, capsys):
    from assistant.cli import main

    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("ASSISTANT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ASSISTANT_CONFIG", str(tmp_path / "none.toml"))
    for cert, key in ((junk, pair.key), (pair.cert, tmp_path / "gone.pem")):
        monkeypatch.setenv("ASSISTANT_TLS_CERT", str(cert))
        monkeypatch.setenv("ASSISTANT_TLS_KEY", str(key))
        assert main(["serve", "--tls"]) == 1  # an exception other than the app's own would raise
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ASSISTANT_TLS_"), lines


# ---- Secure cookies ------------------------------------------------------------------------


def test_secure_cookie_adds_the_attribute_once():
    assert secure_cookie(b"a=1; HttpOnly; Path=/") == b"a=1; HttpOnly; Path=/; Secure"
    assert secure_cookie(b"a=1; Path=/; Secure") == b"a=1; Path=/; Secure"
    assert secure_cookie(b"a=secure") == b"a=secure; Secure"  # a value is not an attribute


async def test_cookies_are_secure_over_https_only():
    async def login(scope, receive, send):
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"set-cookie", b"access-token-x=t; HttpOnly; Path=/; SameSite=none; Secure"),
                    (b"set-cookie", b"access-token-unsecure-x=t; HttpOnly; Path=/; SameSite=lax"),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"{}"})

    async def call(scheme: str) -> list[tuple[bytes, bytes]]:
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        scope = {"type": "http", "scheme": scheme, "method": "POST", "path": "/login"}
        await SecureCookies(login)(scope, receive, send)
        return sent[0]["headers"]

    over_tls = [v for k, v in await call("https") if k == b"set-cookie"]
    assert len(over_tls) == 2 and all(v.endswith(b"; Secure") for v in over_tls)
    assert all(v.count(b"Secure") == 1 for v in over_tls)
    plain = [v for k, v in await call("http") if k == b"set-cookie"]
    assert plain[1] == b"access-token-unsecure-x=t; HttpOnly; Path=/; SameSite=lax"
