"""``sglang-fair bench`` against the real CPU SGLang server: a few seconds of Tree-of-Thoughts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_fair.harness.server import running_server

pytestmark = pytest.mark.e2e


def test_bench_writes_the_sim_keys_from_a_real_server(tiny_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    out = tmp_path / "real.json"
    args = ("--schedule-policy", "dlpm", "--enable-cache-report", "--max-running-requests", "8",
            "--max-total-tokens", "20000")
    with running_server(tiny_model, args, tmp_path / "server.log") as url:
        proc = subprocess.run(
            [sys.executable, "-m", "sglang_fair", "bench", "--base-url", url, "--workload", "tot",
             "--depth", "1", "--clients", "2", "--scenario", "s1", "--duration", "3", "--rate", "0.7",
             "--grace", "30", "--json", str(out), "--no-progress"],
            capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["errors"] == 0 and doc["programs_finished"] == doc["programs"] > 0
    assert doc["calls_answered"] == doc["calls_sent"] == doc["requests"]
    assert set(doc["clients"]) == {"c0", "c1"} and doc["clients"]["c0"]["misbehaving"]
    assert all(c["service"] > 0 and c["actual_service"] > 0 for c in doc["clients"].values())
    # samples of a thought and programs after the first share prompts: SGLang's radix cache hits on them
    assert 0 < doc["cache_hit_rate"] < 1 and "cached_tokens" not in doc["missing"]
    assert doc["throughput"] > doc["actual_service_rate"] > 0
    assert 0 < doc["ttft_p50_s"] <= doc["e2e_p50_s"] and doc["tpot_p50_s"] > 0
    assert set(doc["fairness"]["clients"]) >= {"c0", "c1"}  # this project's server serves /fairness
