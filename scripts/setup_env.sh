#!/usr/bin/env bash
# Creates .venv (Python 3.11) with sglang-fair installed in editable mode plus the extras named in
# $SGLANG_FAIR_EXTRAS (comma-separated; empty: the base install). Safe to run again: an install already
# made with these extras from this pyproject.toml is not made again (the sources are read in place).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
extras=${SGLANG_FAIR_EXTRAS-dev,sim,bench}
stamp=.venv/sglang-fair-installs  # one line per install made: pyproject.toml's hash and the extras
made="$(sha256sum pyproject.toml | cut -c1-16) [$extras]"
if [ -f "$stamp" ] && grep -qxF "$made" "$stamp" && .venv/bin/python -c "import sglang_fair" 2>/dev/null; then
  exit 0
fi
# setuptools' note on every editable install of a project with two source roots, not a problem: hidden
PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
echo "$made" >> "$stamp"
