"""A real reverse proxy (Debian's nginx) in front of the app, on a loopback port, for the tests
of what the app does with requests a proxy forwarded.

The proxy is configured the way a reverse-proxy guide would have it: `Host` passed through,
`X-Forwarded-For` and `X-Forwarded-Proto` added, WebSocket upgrades passed on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from assistant.devtools.launcher import running
from assistant.engine.embedded import free_port

START_TIMEOUT_S = 30.0


def nginx_binary() -> str:
    """nginx's path; AssertionError naming the fix when it is missing (never a skip: the test
    of the proxy must run wherever the suite does)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    assert found, "nginx is needed for the reverse-proxy tests: `scripts/setup.sh --test`"
    return found


def nginx_config(folder: Path, port: int, upstream: str) -> str:
    temp = " ".join(
        f"{kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi")
    )
    temp += f" uwsgi_temp_path {folder / 'uwsgi'}; scgi_temp_path {folder / 'scgi'};"
    # as root, nginx's workers would switch to `nobody`, who cannot use these folders
    user = "user root;" if os.geteuid() == 0 else ""
    return f"""
{user}
worker_processes 1;
daemon off;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    {temp}
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass {upstream};
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_buffering off;
        }}
    }}
}}
"""


@contextlib.contextmanager
def run_nginx(folder: Path, upstream: str) -> Iterator[str]:
    """nginx proxying to `upstream` (`http://127.0.0.1:PORT`); yields the proxy's base URL."""
    binary = nginx_binary()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(nginx_config(folder, port, upstream.rstrip("/")))
    # -e: the error log from the very start (before the config is read) is ours too
    cmd = [binary, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")]
    with running(cmd, log=folder / "stderr.log") as p:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert p.proc.poll() is None, f"nginx exited: {p.output()}"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert time.monotonic() < deadline, f"nginx did not listen: {p.output()}"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
