#!/usr/bin/env bash
# The tests whose components keep timers (pytest marker `timers`: the router service and its liveness
# checks, the data-parallel serving path, per-client TTLs, throttled snapshots, the gateway's discovery
# deadline, health probes and heartbeat liveness, the chaos run's cluster, the router's reconciliation
# of lost notices), run as on a machine booted a minute ago: every Python process, servers and their children included, reads time.monotonic()
# near 60 s (tests/fresh_boot/sitecustomize.py). Code that starts a timer at 0 or compares a monotonic
# reading with a fixed number of seconds behaves differently there. scripts/test.sh runs it after the
# other tests (it uses its .venv).
#   usage: scripts/test_fresh_boot.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
uptime_s=$(awk '{print $1}' /proc/uptime)
offset=$(awk '{print $1 - 60}' /proc/uptime)
if awk -v o="$offset" 'BEGIN { exit !(o <= 0) }'; then
  echo "machine up ${uptime_s} s: already freshly booted, running the tests as they are"
  offset=0
fi
export FRESH_BOOT_OFFSET=$offset
export PYTHONPATH="$PWD/tests/fresh_boot${PYTHONPATH:+:$PYTHONPATH}"
.venv/bin/python -c 'import time; t = time.monotonic(); print(f"time.monotonic() = {t:.1f} s"); assert t < 600 or '"$offset"' == 0'
.venv/bin/pytest -q -rs -p no:cacheprovider -m timers "$@"
