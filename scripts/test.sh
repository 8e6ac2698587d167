#!/usr/bin/env bash
# One command for the tests: set up .venv, then lint (ruff), type-check (mypy) and run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
.venv/bin/ruff check python tests scripts
.venv/bin/mypy
.venv/bin/pytest -q "$@"
