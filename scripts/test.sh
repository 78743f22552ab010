#!/usr/bin/env bash
# Set up (once) and run the whole test suite.
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test || exit 1
.venv/bin/ruff check assistant tests scripts app.py || exit 1
.venv/bin/python -m pytest -q "$@"
rc=$?
# pytest's "no tests collected" (5) is not a failure of the code under test
if [ "$rc" = 5 ]; then rc=0; fi
exit "$rc"
