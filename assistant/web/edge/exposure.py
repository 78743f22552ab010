"""Who may reach the app at all, before any login or route: the `Host` allow-list and, without
a login, nothing from the network (issue 26, items 1 and 2).

DNS rebinding: a web page the user visits can point its own name at 127.0.0.1 and then talk
to the app from the user's browser, which sends that name as `Host`. Checking `Origin` against
`Host` does not help (both carry the attacker's name), so only known names are served: 421
otherwise. Without a login the app is for this machine only: a request that a reverse proxy
forwarded, or that arrived from (or at) a non-loopback address, is refused with 403.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from assistant.settings import Settings

FORWARDED = (
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
    "cf-connecting-ip",
    "x-cluster-client-ip",
    "x-original-forwarded-for",
    "via",
)
"""Headers reverse proxies add: a request carrying one came from elsewhere, whatever its
peer address (the proxy itself may well run on this machine)."""

SET_AUTH = "set ASSISTANT_AUTH=user:password to serve other machines"


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str


def is_loopback(host: str) -> bool:
    """localhost (and `*.localhost`, which browsers resolve to loopback themselves) or a
    loopback address."""
    host = host.strip().strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def host_name(value: str) -> str | None:
    """The name in a `Host` header, lowercase, without port or brackets; None: malformed."""
    try:
        parts = urlsplit(f"//{value.strip()}")
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path:
        return None
    return parts.hostname.rstrip(".")


def _matches(name: str, pattern: str) -> bool:
    # a certificate's wildcard covers exactly one label
    if pattern.startswith("*."):
        head, _, rest = name.partition(".")
        return bool(head) and rest == pattern[2:]
    return name == pattern


@dataclass(frozen=True)
class Exposure:
    """The rules for one server: its login (on or off) and the names it answers to."""

    login: bool
    names: frozenset[str]
    """ASSISTANT_ALLOWED_HOSTS and the served certificate's names."""
    check_hosts: bool
    """Without a login, always; with one, when ASSISTANT_ALLOWED_HOSTS is set."""

    @classmethod
    def of(cls, settings: Settings, certificate_names: Iterable[str] = ()) -> Exposure:
        names = {n.lower().strip("[]") for n in (*settings.allowed_hosts, *certificate_names)}
        login = bool(settings.auth)
        return cls(login, frozenset(names), not login or bool(settings.allowed_hosts))

    def host_allowed(self, name: str) -> bool:
        return is_loopback(name) or any(_matches(name, n) for n in self.names)

    def refusal(self, scope: Mapping[str, Any], headers: Mapping[str, str]) -> Refusal | None:
        """Why this request must not be served at all, or None."""
        if not self.login:
            proxied = next((h for h in FORWARDED if h in headers), None)
            if proxied is not None:
                return Refusal(
                    403,
                    f"refused: a proxy forwarded this request ({proxied}) and without a login "
                    f"the app serves this machine only; {SET_AUTH}",
                )
            for end in ("client", "server"):
                address = (scope.get(end) or ("", 0))[0]
                # a Unix socket has no address; anything else must be loopback
                if address and not is_loopback(address):
                    return Refusal(
                        403,
                        f"refused: {address} is not this machine and without a login the app "
                        f"serves this machine only; {SET_AUTH}",
                    )
        if self.check_hosts:
            # behind a proxy (with a login) the browser's name is in X-Forwarded-Host, one
            # entry per proxy: every name must be known
            given = [headers.get("host", "")]
            given += [v for v in headers.get("x-forwarded-host", "").split(",") if v.strip()]
            for value in given:
                name = host_name(value)
                if name is None or not self.host_allowed(name):
                    return Refusal(
                        421,
                        f"refused: unknown host {value.strip()[:100]!r}; to serve that name "
                        "add it to ASSISTANT_ALLOWED_HOSTS",
                    )
        return None
