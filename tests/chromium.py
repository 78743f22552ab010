"""Debian's Chromium for the tests that drive a real page: where it is, how every test starts
it, and the flags for a fake microphone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium at /usr/bin/chromium (scripts/setup.sh --test installs it)",
)
ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run")
"""Every launch: headless, and no sandbox (the tests run as root in a container)."""
MICROPHONE = ("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream")
"""A fake microphone, allowed without asking (add --use-file-for-fake-audio-capture=F)."""
AUTOPLAY = "--autoplay-policy=no-user-gesture-required"
"""A call's replies play without a click first."""


def launch(pw: Any, *args: str) -> Any:
    """A fresh headless Chromium with ARGS and `args` (a Playwright `Browser`)."""
    if not CHROMIUM.exists():
        pytest.fail("needs Debian's chromium at /usr/bin/chromium (scripts/setup.sh --test)")
    return pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=[*ARGS, *args])
