"""HTTPS by the app itself: the certificate it serves (given, or made once), the addresses a
phone can open, and login cookies that never travel over plain HTTP.

Why the app serves TLS at all: browsers give the microphone (`getUserMedia`) and audio
worklets only to a secure context, that is `https://` or the machine itself (`localhost`,
127.0.0.0/8). A phone on the same network opening `http://192.168.x.y:7860` gets a page it
can type to but not speak to.

`assistant serve --tls` without `ASSISTANT_TLS_CERT`/`ASSISTANT_TLS_KEY` makes a self-signed
certificate once, for the machine's host names and addresses, in `<data dir>/tls/`; later
starts reuse it (so its fingerprint stays what the phone was told to trust) unless it has
expired, is about to, or no longer covers an address the machine now has.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import ipaddress
import os
import socket
import ssl
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from assistant.datadir import make_private_dir
from assistant.errors import ConfigError
from assistant.web.edge.security import is_loopback

VALID_DAYS = 825
"""The longest validity Apple's devices accept for a TLS server certificate."""
RENEW_DAYS = 30
"""A made certificate this close to expiry is made again at start."""
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
OWN = ("the certificate", "its key")
"""How errors name the self-signed pair's files."""


@dataclass(frozen=True)
class Certificate:
    """The certificate the server presents, and what a person needs to check it."""

    cert: Path
    key: Path
    fingerprint: str
    """SHA-256 of the certificate (DER), as browsers show it: `AB:CD:...`."""
    names: tuple[str, ...]
    """The DNS names and IP addresses it is valid for (its subjectAltName)."""
    not_after: dt.datetime
    made: bool = False
    """Made by this start (first time, expired, or new addresses), not reused."""
    why_made: str = ""


# ---- which names and addresses this machine answers to ------------------------------------


def machine_names(host: str) -> list[str]:
    """What a certificate for a server bound to `host` should cover: the machine's names and
    addresses (all interfaces for a wildcard bind), loopback always, `host` itself."""
    hostname = socket.gethostname()
    names = ["localhost", hostname, socket.getfqdn()]
    if hostname and "." not in hostname:
        names.append(f"{hostname}.local")  # mDNS: how phones often reach a home machine
    addresses = ["127.0.0.1", "::1"]
    if host.strip("[]") in WILDCARD_HOSTS:
        addresses += interface_addresses()
    else:
        names.append(host.strip("[]"))
    return _unique(n for n in [*names, *addresses] if n)


def interface_addresses() -> list[str]:
    """The machine's own IPv4 and IPv6 addresses (no link-local ones: a URL cannot name them
    without a zone), from every interface on Linux, else the address of the default route."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        for _, name in socket.if_nameindex():
            found += _ipv4_of(name)
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            found.append(str(ipaddress.IPv6Address(bytes.fromhex(line.split()[0]))))
    for family, probe in ((socket.AF_INET, "192.0.2.255"), (socket.AF_INET6, "2001:db8::1")):
        # no packet is sent: connecting a UDP socket only picks the outgoing address
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((probe, 9))
            found.append(s.getsockname()[0])
    usable = []
    for text in found:
        with contextlib.suppress(ValueError):
            ip = ipaddress.ip_address(text)
            if not (ip.is_link_local or ip.is_unspecified or ip.is_multicast):
                usable.append(str(ip))
    return _unique(usable)


def _ipv4_of(interface: str) -> list[str]:
    siocgifaddr = 0x8915  # Linux: an interface's IPv4 address
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            raw = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", interface[:15].encode()))
        except OSError:  # no IPv4 address on it
            return []
    return [socket.inet_ntoa(raw[20:24])]


def urls_to_open(host: str, port: int, names: Sequence[str]) -> list[str]:
    """The addresses to type into a phone (other machines first), then this machine's."""
    bare = host.strip("[]")
    if bare in WILDCARD_HOSTS:
        # 0.0.0.0 listens on IPv4 only; "::" on both (Linux's default dual stack)
        versions = (4,) if bare == "0.0.0.0" else (4, 6)
        others = [
            n
            for n in names
            if _is_ip(n)
            and not ipaddress.ip_address(n).is_loopback
            and ipaddress.ip_address(n).version in versions
        ]
        others.sort(key=lambda n: ipaddress.ip_address(n).version)  # IPv4 first: easier to type
        hostname = socket.gethostname()
        local = f"{hostname}.local" if hostname and "." not in hostname else ""
        targets = [*others, *([local] if local in names else []), "localhost"]
    else:
        targets = [bare]
    return [f"https://{_url_host(t)}:{port}/" for t in _unique(targets)]


def _url_host(name: str) -> str:
    return f"[{name}]" if _is_ip(name) and ipaddress.ip_address(name).version == 6 else name


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ---- the certificate: given, or made once -------------------------------------------------


def fingerprint(der: bytes) -> str:
    """SHA-256 of a DER certificate in the colon-separated form browsers show."""
    import hashlib

    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def load_certificate(
    cert_path: Path,
    key_path: Path,
    labels: tuple[str, str] = ("ASSISTANT_TLS_CERT", "ASSISTANT_TLS_KEY"),
) -> Certificate:
    """Check a PEM certificate (chain) and its private key; ConfigError with one line if they
    cannot be served: unreadable, not PEM, an encrypted key, or a key of another certificate."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    cert_name, key_name = f"{labels[0]} {cert_path}", f"{labels[1]} {key_path}"
    cert_pem, key_pem = _read(cert_path, cert_name), _read(key_path, key_name)
    try:
        chain = x509.load_pem_x509_certificates(cert_pem)
    except ValueError:
        raise ConfigError(f"{cert_name} is not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise ConfigError(f"{key_name} is encrypted; give the key without a passphrase") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(f"{key_name} is not a PEM private key") from None
    leaf = chain[0]
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if leaf.public_key().public_bytes(der, spki) != key.public_key().public_bytes(der, spki):
        raise ConfigError(f"{key_name} is not the key of the certificate in {cert_path}")
    try:  # exactly what the server will do with them
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert_path, key_path)
    except ssl.SSLError as e:
        raise ConfigError(f"{cert_name}: the TLS library refuses it ({e.reason or e})") from None
    return Certificate(
        cert=cert_path,
        key=key_path,
        fingerprint=fingerprint(leaf.public_bytes(der)),
        names=_san_names(leaf),
        not_after=leaf.not_valid_after_utc,
    )


def _read(path: Path, name: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{name}: cannot read it ({e.strerror or e})") from None


def _san_names(cert: Any) -> tuple[str, ...]:
    from cryptography import x509

    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    dns = san.get_values_for_type(x509.DNSName)
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    return tuple(_unique([*dns, *ips]))


def self_signed(
    directory: Path,
    names: Sequence[str],
    *,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> Certificate:
    """The certificate in `directory` (cert.pem, key.pem), made if there is none, or if the
    one there has expired, expires within RENEW_DAYS, does not cover every name in `names`,
    or cannot be read. The new one covers its predecessor's names too, so a phone that used
    an address before still can."""
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    why = "there was none"
    kept: tuple[str, ...] = ()
    if cert_path.exists() or key_path.exists():
        try:
            old = load_certificate(cert_path, key_path, labels=OWN)
        except ConfigError as e:
            why = f"the old one was unusable: {e}"
        else:
            missing = [n for n in names if n not in old.names]
            if old.not_after - now() < dt.timedelta(days=RENEW_DAYS):
                why = f"the old one expires {old.not_after:%Y-%m-%d}"
            elif missing:
                why = f"the old one did not cover {', '.join(missing)}"
                kept = old.names
            else:
                return old
    try:
        _make(cert_path, key_path, _unique([*names, *kept]), now())
    except OSError as e:
        raise ConfigError(
            f"cannot write the TLS certificate in {directory}: {e.strerror or e}"
        ) from None
    made = load_certificate(cert_path, key_path, labels=OWN)
    return replace(made, made=True, why_made=why)


def _make(cert_path: Path, key_path: Path, names: Sequence[str], now: dt.datetime) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())  # P-256: every phone's TLS stack has it
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, f"assistant on {socket.gethostname()}"[:64]),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "assistant (self-signed)"),
        ]
    )
    alt: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address(n)) if _is_ip(n) else x509.DNSName(n) for n in names
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))  # a phone's clock may run a bit behind
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    make_private_dir(cert_path.parent)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write(key_path, key_pem, 0o600)  # the key first: a cert without its key is useless
    # the data directory's files are its user's alone, the certificate too (issue 49)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o600)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Atomically: a crash mid-write leaves the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask, and a leftover tmp's mode
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def server_certificate(
    cert: Path | None, key: Path | None, tls: bool, data_dir: Path, host: str
) -> Certificate | None:
    """The certificate to serve: the given files, else (with `--tls`) the self-signed one in
    the data directory; None: plain HTTP."""
    if cert is not None and key is not None:
        return load_certificate(cert, key)
    if not tls:
        return None
    return self_signed(data_dir / "tls", machine_names(host))


def describe(certificate: Certificate, host: str, port: int) -> list[str]:
    """What `assistant serve` prints: where the certificate is, its fingerprint, what to open."""
    if certificate.made:
        source = f"made a self-signed certificate ({certificate.why_made})"
    elif certificate.cert.parent.name == "tls":
        source = "self-signed certificate"
    else:
        source = "certificate"
    lines = [
        f"TLS: {source}: {certificate.cert}",
        f"  for: {', '.join(certificate.names) or '(no names)'}",
        f"  valid until {certificate.not_after:%Y-%m-%d}",
        f"  SHA-256 fingerprint: {certificate.fingerprint}",
        "  check that your browser shows this fingerprint before you trust the certificate",
    ]
    urls = urls_to_open(host, port, certificate.names)
    lines.append("open: " + "  ".join(urls))
    if is_loopback(host):
        lines.append(
            "  (this machine only: for a phone, serve on --host 0.0.0.0 with ASSISTANT_AUTH set)"
        )
    return lines


# ---- login cookies ------------------------------------------------------------------------


class SecureCookies:
    """ASGI middleware: over HTTPS, every cookie the app sets is marked `Secure`.

    Gradio sets its login token twice, once `Secure` and once (the "unsecure" copy) without,
    so that logins work over plain HTTP. Over TLS the second copy would let a browser send the
    token over plain HTTP to the same host; marked `Secure`, it never is. A request counts as
    HTTPS when uvicorn says so: its own TLS, or a trusted proxy's `X-Forwarded-Proto: https`.
    """

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("scheme") != "https":
            await self.app(scope, receive, send)
            return

        async def send_secure(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, secure_cookie(v) if k.lower() == b"set-cookie" else v)
                    for k, v in message.get("headers", [])
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_secure)


def secure_cookie(header: bytes) -> bytes:
    """A `Set-Cookie` value with the `Secure` attribute (added only if it is missing)."""
    attributes = [part.strip().lower() for part in header.split(b";")[1:]]
    return header if b"secure" in attributes else header + b"; Secure"
