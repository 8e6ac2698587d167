#!/usr/bin/env bash
# One command for the tests: set up .venv (test tools, simulator extras, and a CPU build of SGLang
# 0.5.23 for the plugin and end-to-end tests), then lint (ruff), type-check (mypy) and run pytest: the
# tests of components that keep timers (marker `timers`) as on a machine booted a minute ago
# (scripts/test_fresh_boot.sh), the others as they are. With arguments: pytest with them only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
bash scripts/install_sglang_cpu.sh .venv/bin/python  # fails loudly if SGLang does not import
.venv/bin/ruff check python router tests scripts
.venv/bin/mypy
if (($#)); then
  exec .venv/bin/pytest -q -rs "$@"
fi
.venv/bin/pytest -q -rs -m "not timers"
bash scripts/test_fresh_boot.sh
