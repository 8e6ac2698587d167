#!/usr/bin/env bash
# Creates .venv (Python 3.11) with sglang-fair installed in editable mode plus the extras named in
# $SGLANG_FAIR_EXTRAS (comma-separated; empty: the base install). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
extras=${SGLANG_FAIR_EXTRAS-dev,sim,bench}
.venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
