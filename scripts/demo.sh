#!/usr/bin/env bash
# One command for a new user: set up .venv (base install and the plotting extra: no GPU, no torch) and
# run the main job, a side-by-side simulation of five router:scheduler pairs on Tree-of-Thoughts programs
# with one misbehaving client, on 2 simulated A100s (about a minute on 2 cores): a table, a two-line
# verdict and one picture (out/demo.png). Extra flags are passed on.
set -euo pipefail
cd "$(dirname "$0")/.."
SGLANG_FAIR_EXTRAS="sim" bash scripts/setup_env.sh
# --max-running 256 (SGLang's --max-running-requests): the cap binds before the KV pool does, so the
# admission order decides who is served. At SGLang's own default cap (2,048 on an A100) the pool binds
# first and, in this simulator, the fair policies' lead vanishes (docs/evidence/fidelity.md).
exec .venv/bin/sglang-fair sim --workload tot --scenario s1 --clients 4 --dp 2 --duration 30 --max-running 256 \
  --plot out/demo.png --compare "round_robin:lpm,cache_aware:lpm,client_rr:vtc,d2lpm:dlpm,fair_cache_aware:dlpm_light" "$@"
