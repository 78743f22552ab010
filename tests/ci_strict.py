"""In CI every test must run: a skip there is a failure, and so is missing test audio.

On a developer's machine a test whose tool is missing (Chromium, ../shared audio) may skip. In
CI (`CI` or `ASSISTANT_CI` set; `.ci/run` sets it) a skipped test would let a run pass without
testing the page or speech at all, so it is reported as failed with the skip's reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def strict() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("ASSISTANT_CI"))


def pytest_sessionstart(session: pytest.Session) -> None:
    from tests.conftest import AUDIO

    if strict() and not (Path(AUDIO) / "transcripts.json").is_file():
        raise pytest.UsageError(
            f"CI needs the test recordings in {AUDIO} (../shared/audio or ASSISTANT_TEST_AUDIO)"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if strict() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        reason = str(reason).removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every test must run: {reason}"
