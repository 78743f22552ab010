"""Failed logins, counted per user and client address: every way in that takes a password
is throttled by one of these (the command line's local secret is not: nothing to guess there,
and counting it let a wrong one lock the right one out; `identity.LocalGate`)."""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

IPV6_CLIENT_PREFIX = 64
"""An IPv6 client is counted by its /64, which one client usually has whole."""
MAX_TRACKED = 10_000
"""Throttle entries kept at most, oldest dropped first: memory stays bounded under a flood."""


@dataclass
class LoginThrottle:
    """Failed logins counted per (user, client address) and per client address.

    Past `max_failures` for a user from one address (or `max_client_failures` for any users
    from one address) within `window_s`, every login from there is refused for `lockout_s`,
    right password or not. Per address, so a stranger cannot lock a user out everywhere.
    """

    max_failures: int = 5
    max_client_failures: int = 20
    window_s: float = 60.0
    lockout_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _failures: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict)
    _locked: dict[str, float] = field(default_factory=dict)

    def retry_after(self, user: str, client: str) -> float:
        """Seconds until this login may be tried again; 0 when it may be tried now."""
        now = self.clock()
        until = max(self._locked.get(k, 0.0) for k in self._keys(user, client))
        return max(0.0, until - now)

    def failed(self, user: str, client: str) -> None:
        now = self.clock()
        for key, limit in zip(
            self._keys(user, client), (self.max_failures, self.max_client_failures), strict=True
        ):
            times = self._failures.pop(key, None) or deque()
            times.append(now)
            while times and times[0] <= now - self.window_s:
                times.popleft()
            self._failures[key] = times  # re-inserted: most recent last
            if len(times) >= limit:
                self._locked[key] = now + self.lockout_s
                times.clear()
        self._prune(now)

    def succeeded(self, user: str, client: str) -> None:
        self._failures.pop(self._keys(user, client)[0], None)

    def _keys(self, user: str, client: str) -> tuple[str, str]:
        where = client_network(client)
        return f"user:{user[:128]}@{where}", f"client:{where}"

    def _prune(self, now: float) -> None:
        while len(self._failures) > MAX_TRACKED:
            self._failures.popitem(last=False)
        if len(self._locked) > MAX_TRACKED:
            self._locked = {k: t for k, t in self._locked.items() if t > now}


def client_network(client: str) -> str:
    """Where failures are counted: an IPv4 address, or an IPv6 address's /64, which one
    client usually has whole (rotating addresses inside it must not escape the count)."""
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return client
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # ::ffff:192.0.2.1 is that IPv4 client
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_CLIENT_PREFIX), strict=False))
    return str(address)
