"""The host allow-list and the no-login network rule, as rules (the attacks on the running app
are in test_attacks.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from assistant.web.edge.exposure import Exposure, host_name
from assistant.web.edge.login_wall import Owners, ids_in_path, is_public

LOCAL = {"client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 7860)}


@pytest.mark.parametrize(
    ("header", "name"),
    [("localhost:7860", "localhost"), ("[::1]:7860", "::1"), ("Box.Local.", "box.local"),
     ("a:b", None), ("", None), ("user@evil.test", None), ("evil.test/x", None)],
)  # fmt: skip
def test_host_name(header, name):
    assert host_name(header) == name


def test_without_a_login_only_known_names_from_this_machine(settings):
    rules = Exposure.of(replace(settings, allowed_hosts=("box.lan",)), ["*.example.org"])
    assert rules.refusal(LOCAL, {"host": "localhost:7860"}) is None
    assert rules.refusal(LOCAL, {"host": "app.localhost"}) is None
    assert rules.refusal(LOCAL, {"host": "box.lan:7860"}) is None
    assert rules.refusal(LOCAL, {"host": "a.example.org"}) is None
    assert rules.refusal(LOCAL, {"host": "a.b.example.org"}).status == 421  # one label only
    assert rules.refusal(LOCAL, {"host": "localhost.evil.test"}).status == 421
    assert rules.refusal(LOCAL, {}).status == 421  # no Host at all
    proxied = rules.refusal(LOCAL, {"host": "localhost", "x-real-ip": "203.0.113.9"})
    assert proxied.status == 403 and "ASSISTANT_AUTH" in proxied.reason
    remote = {"client": ("192.0.2.7", 5000), "server": ("127.0.0.1", 7860)}
    assert rules.refusal(remote, {"host": "localhost"}).status == 403


def test_with_a_login_the_list_applies_only_when_set(settings):
    login = replace(settings, auth=(("ann", "pw"),))
    remote = {"client": ("192.0.2.7", 5000), "server": ("192.0.2.1", 7860)}
    assert Exposure.of(login).refusal(remote, {"host": "anything", "via": "1.1 p"}) is None
    listed = Exposure.of(replace(login, allowed_hosts=("box.lan",)))
    assert listed.refusal(remote, {"host": "box.lan", "x-forwarded-host": "box.lan"}) is None
    assert listed.refusal(remote, {"host": "box.lan", "x-forwarded-host": "evil"}).status == 421


def test_the_login_page_is_public_and_gradio_routes_are_not():
    def scope(path: str, method: str = "GET") -> dict:
        return {"type": "http", "path": path, "method": method}

    assert all(is_public(scope(p)) for p in ("/", "/assets/index.js", "/v1/models", "/metrics"))
    assert is_public(scope("/login", "POST"))
    assert not any(
        is_public(scope(p, m))
        for p, m in (("/gradio_api/cancel", "POST"), ("/gradio_api/heartbeat/s", "GET"),
                     ("/", "POST"), ("/listen", "GET"), ("/config", "GET"))
    )  # fmt: skip


def test_ids_in_paths_and_owners():
    assert list(ids_in_path("/gradio_api/heartbeat/s1", "GET")) == ["s:s1"]
    assert list(ids_in_path("/gradio_api/stream/s1/0/1/playlist.m3u8", "GET")) == ["s:s1"]
    assert list(ids_in_path("/gradio_api/stream/e1/close", "POST")) == ["e:e1"]
    owners = Owners(capacity=2)
    assert owners.claim("s:1", "ann") and not owners.claim("s:1", "bob")
    assert owners.claim("e:9", "bob", first_use_claims=False)  # unknown events claim nothing
    assert owners.claim("e:9", "ann", first_use_claims=False)
    owners.note("s:2", "bob")
    owners.note("s:3", "bob")  # past capacity: the least recently used is forgotten
    assert owners.claim("s:1", "bob")


def test_login_failures_count_an_ipv6_client_by_its_64():
    from assistant.web.edge.security import client_network

    assert client_network("2001:db8:1:2::5") == client_network("2001:db8:1:2:ffff::9")
    assert client_network("2001:db8:1:3::5") != client_network("2001:db8:1:2::5")
    assert client_network("::ffff:192.0.2.1") == client_network("192.0.2.1") == "192.0.2.1"
    assert client_network("unknown") == "unknown"
