"""Who may use the Wyoming port, and as which login.

Wyoming has no authentication: whoever reaches the port is the login the operator named
(`ASSISTANT_WYOMING_USER`). So the port listens on loopback unless a host is named, and a
non-loopback host needs both that setting and an allow-list of client addresses
(`ASSISTANT_WYOMING_CLIENTS`); any other peer is refused before its first event is read.
"""

from __future__ import annotations

import ipaddress

from assistant.app_client import LOCAL_OWNER
from assistant.settings import Settings
from assistant.web.edge.exposure import is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10700
"""Wyoming's usual port (Home Assistant suggests it for a new Wyoming service)."""


def parse_address(text: str) -> tuple[str, int]:
    """`--wyoming`'s value, `[HOST:]PORT` (`[::1]:10700` for IPv6), as (host, port); a
    ValueError says what is wrong."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, text
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--wyoming: {text!r} is not [HOST:]PORT (e.g. 10700 or 0.0.0.0:10700)")
    return host, int(port)


def _logins(settings: Settings) -> list[str]:
    return [user for user, _ in settings.auth] if settings.auth else [LOCAL_OWNER]


def login(settings: Settings) -> str | None:
    """The login Wyoming clients act as; None: none is configured (there are logins and none
    is named for them, or the one named is not one of them)."""
    if settings.wyoming_user:
        return settings.wyoming_user if settings.wyoming_user in _logins(settings) else None
    return None if settings.auth else LOCAL_OWNER


def refusal(settings: Settings, host: str) -> str | None:
    """Why the Wyoming port may not listen on `host` with these settings, or None."""
    logins = ", ".join(_logins(settings))
    if settings.wyoming_user and login(settings) is None:
        return f"ASSISTANT_WYOMING_USER: {settings.wyoming_user!r} is not " + (
            f"one of the logins ({logins})"
            if settings.auth
            else f"'{LOCAL_OWNER}', the only user without ASSISTANT_AUTH"
        )
    if login(settings) is None:
        return (
            "the Wyoming port needs the login it acts as: set ASSISTANT_WYOMING_USER to one "
            f"of {logins}"
        )
    if is_loopback(host):
        return None
    if not settings.wyoming_user or not settings.wyoming_clients:
        return (
            f"refusing to serve Wyoming on {host}: Wyoming has no authentication, so a "
            "non-loopback host needs ASSISTANT_WYOMING_USER (the login it acts as) and "
            "ASSISTANT_WYOMING_CLIENTS (the addresses that may use it, e.g. Home Assistant's)"
        )
    return None


class Clients:
    """The peers that may use the port: loopback, and the allow-list's addresses."""

    def __init__(self, allowed: tuple[str, ...]):
        self.networks = [ipaddress.ip_network(a, strict=False) for a in allowed]

    def allows(self, peer: str) -> bool:
        if is_loopback(peer):
            return True
        try:
            address = ipaddress.ip_address(peer.split("%")[0])
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # a dual-stack socket's view of an IPv4 client
        return any(address in network for network in self.networks)
