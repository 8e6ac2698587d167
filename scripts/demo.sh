#!/usr/bin/env bash
# One command for a new user: set up .venv (no GPU, no torch) and run the built-in comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
SGLANG_FAIR_EXTRAS=${SGLANG_FAIR_EXTRAS:-dev} bash scripts/setup_env.sh
exec .venv/bin/sglang-fair demo "$@"
