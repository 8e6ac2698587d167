#!/usr/bin/env bash
# The system programs some tests drive for real: Debian's chromium (headless, the fairness page's tests:
# tests/dashboard/test_page_in_browser.py, tests/e2e/test_fairness_page_e2e.py) and haproxy (in front of
# the gateways in the chaos e2e tests). Without them those tests skip. As root: apt-get, no recommended
# packages; 45 s on the 2-core test machine with a fresh package index (chromium 36 s with the
# `apt-get update`, haproxy 10 s). Safe to run again: it installs only what is missing.
set -euo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
command -v haproxy >/dev/null || need+=(haproxy)
if ((${#need[@]} == 0)); then
  echo "install_test_tools: chromium and haproxy present"
  exit 0
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
  echo "install_test_tools: cannot install ${need[*]} here (root and apt-get needed): the tests that use them skip" >&2
  exit 1
fi
start=$(date +%s)
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
echo "install_test_tools: installed ${need[*]} in $(( $(date +%s) - start )) s"
