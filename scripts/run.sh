#!/usr/bin/env bash
# Set up (once) and run the web app on http://127.0.0.1:7860 .
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/assistant serve "$@"
