"""Save the page's screenshots for the README (docs/screenshots/*.png).

    .venv/bin/python scripts/screenshots.py

It runs the real-browser tests (tests/test_browser.py, tests/test_browser_conversations.py)
with ASSISTANT_SCREENSHOTS set, so the shots show exactly the sessions those tests drive:
engine down, a spoken turn, a typed turn, a delegated job, the dashboard; and the page with
its conversations at 1400 px and at 390 px (phone), with the Jobs panel as a list there.
Needs /usr/bin/chromium (`scripts/setup.sh --test` installs it); emoji show only with a color
emoji font installed (Debian: fonts-noto-color-emoji).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "screenshots"
SHOTS = (
    "idle",
    "voice-turn",
    "chat-turn",
    "jobs",
    "dashboard",
    "conversations-1400",
    "conversations-390",
    "jobs-390",
)


def main() -> int:
    started = time.time()
    env = {**os.environ, "ASSISTANT_SCREENSHOTS": str(OUT)}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_browser.py",
        "tests/test_browser_conversations.py",
    ]
    rc = subprocess.call(cmd, cwd=REPO, env=env)
    fresh = [OUT / f"{n}.png" for n in SHOTS if (OUT / f"{n}.png").exists()]
    fresh = [p for p in fresh if p.stat().st_mtime >= started]
    for path in fresh:
        print(path.relative_to(REPO))
    if rc == 0 and len(fresh) < len(SHOTS):
        print("error: not every screenshot was taken (was the test skipped?)", file=sys.stderr)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
