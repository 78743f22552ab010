"""The access settings' values (logins, host names, admins, proxies and other networks, page
sources, TLS files, a login's bytes): their text (an environment variable's, or a TOML list)
parsed, a refusal naming the setting. `assistant.settings` reads them; nothing here reads the
environment."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

from assistant.errors import ConfigError


def parse_auth(raw: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        user, sep, password = item.partition(":")
        if not sep or not user or not password:
            raise ConfigError("ASSISTANT_AUTH must be user:password[,user:password]")
        pairs.append((user, password))
    return tuple(pairs)


def parse_hosts(raw: Any) -> tuple[str, ...]:
    """ASSISTANT_ALLOWED_HOSTS: comma-separated host names or addresses, without scheme or
    port (a TOML list works too); compared without case."""
    items = raw if isinstance(raw, list) else str(raw).split(",")
    hosts = []
    for item in items:
        name = str(item).strip().lower()
        if not name:
            continue
        if any(c in name for c in "/@ \t") or (name.count(":") == 1 and "[" not in name):
            raise ConfigError(
                f"ASSISTANT_ALLOWED_HOSTS: {item!r} is not a host name; give names only "
                "(e.g. assistant.example.org,192.168.1.20), without scheme or port"
            )
        hosts.append(name.strip("[]"))
    return tuple(dict.fromkeys(hosts))


def parse_admins(raw: Any) -> tuple[str, ...] | None:
    """ASSISTANT_ADMINS: comma-separated login names (`none`: no login is an admin)."""
    if raw is None:
        return None
    items = raw if isinstance(raw, list) else str(raw).split(",")
    names = tuple(n for n in (str(i).strip() for i in items) if n)
    return () if names in ((), ("none",)) else names


def parse_proxies(raw: Any) -> tuple[str, ...]:
    """ASSISTANT_TRUSTED_PROXIES: comma-separated addresses or networks (`10.0.0.0/8`)."""
    return parse_networks(raw, "ASSISTANT_TRUSTED_PROXIES", "the proxies' addresses, e.g. ")


def parse_networks(raw: Any, var: str, give: str = "e.g. ") -> tuple[str, ...]:
    """Comma-separated addresses or networks (`10.0.0.0/8`), each normalised."""
    items = raw if isinstance(raw, list) else str(raw).split(",")
    networks = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        try:
            networks.append(str(ipaddress.ip_network(text, strict=False)))
        except ValueError as e:
            raise ConfigError(
                f"{var}: {item!r} is not an address or network; give {give}127.0.0.1,10.0.0.0/8"
            ) from e
    return tuple(dict.fromkeys(networks))


def parse_sources(raw: Any) -> tuple[str, ...]:
    """ASSISTANT_PAGE_SOURCES: comma-separated origins (`https://host[:port]`)."""
    items = raw if isinstance(raw, list) else str(raw).split(",")
    sources = []
    for item in items:
        text = str(item).strip().rstrip("/")
        if not text:
            continue
        if not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:*]+", text):
            raise ConfigError(
                f"ASSISTANT_PAGE_SOURCES: {item!r} is not an origin; give e.g. "
                "https://images.example.org"
            )
        sources.append(text)
    return tuple(dict.fromkeys(sources))


def tls_files(cert: Any, key: Any) -> tuple[Path | None, Path | None]:
    """The TLS certificate and key paths, both or neither, each an existing file (what is in
    them is checked when the server starts: `web.edge.tls.load_certificate`)."""
    if not cert and not key:
        return None, None
    if not cert or not key:
        given, missing = ("CERT", "KEY") if cert else ("KEY", "CERT")
        raise ConfigError(
            f"ASSISTANT_TLS_{given} is set but ASSISTANT_TLS_{missing} is not; "
            "set both (PEM files), or neither"
        )
    paths = []
    for name, value in (("CERT", cert), ("KEY", key)):
        path = Path(str(value)).expanduser()
        if not path.is_file():
            raise ConfigError(f"ASSISTANT_TLS_{name}: no such file: {path}")
        paths.append(path.resolve())
    return paths[0], paths[1]


def parse_bytes(raw: Any, var: str) -> int:
    """A number of bytes (0: no limit); a refusal naming `var` for anything else."""
    text = str(raw).strip().replace("_", "")
    if not text.isdigit():
        raise ConfigError(f"{var} must be a whole number of bytes (0: no limit), not {raw!r}")
    return int(text)
