#!/usr/bin/env bash
# One command for the tests: set up .venv (test tools, simulator extras, and a CPU build of SGLang
# 0.5.23 for the plugin and end-to-end tests), then lint (ruff), type-check (mypy) and run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
bash scripts/install_sglang_cpu.sh .venv/bin/python  # fails loudly if SGLang does not import
.venv/bin/ruff check python router tests scripts
.venv/bin/mypy
.venv/bin/pytest -q -rs "$@"
