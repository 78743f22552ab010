#!/usr/bin/env bash
# Set up (once) and run the whole test suite.
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test || exit 1
.venv/bin/ruff check assistant tests scripts app.py || exit 1
# pytest's own exit code: "no tests collected" (5) is a failure too
exec .venv/bin/python -m pytest -q "$@"
