"""VTC in the real SGLang server; client identity from header, OpenAI ``user`` and the default;
``sglang-fair bench`` against it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fair_e2e_support import MAX_RUNNING, post, requests_eventually, requests_of, wait_idle

from sglang_fair.harness.scenario import Summary, Workload, run_scenario
from sglang_fair.harness.server import get_json, running_server

pytestmark = pytest.mark.e2e
WINDOW = 15.0


@pytest.fixture(scope="module")
def vtc_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Summary]]:
    log = tmp_path_factory.mktemp("vtc") / "server.log"
    args = ("--schedule-policy", "vtc", *MAX_RUNNING, "--client-weights", "medium=2", "--enable-cache-report")
    with running_server(tiny_model, args, log) as url:
        # medium keeps as many requests in flight as heavy: both stay backlogged in the queue
        summary = run_scenario(url, Workload(medium_concurrency=24), WINDOW)
        print("\nvtc ", json.dumps(summary.row()))
        wait_idle(url)
        yield url, summary


def test_vtc_serves_the_light_client_and_weights_service(vtc_server: tuple[str, Summary]) -> None:
    url, vtc = vtc_server
    assert vtc.done["light"] >= 3, vtc.row()
    delta = vtc.service_delta
    # weighted VTC: medium (weight 2) gets about twice heavy's service while both are backlogged
    # (VTC charges every input token, cached or not, as in [2]); the margin covers the requests
    # in flight at the two snapshots ([2] Thm 4.4 bounds the difference by 2 * max(w_e L, w_q M)).
    ratio = delta["medium"] / delta["heavy"]
    assert 1.3 <= ratio <= 3.0, delta
    clients = get_json(url + "/fairness")["clients"]
    assert clients["medium"]["weight"] == 2.0 and clients["heavy"]["counter"] is not None


def test_identity_header_then_user_then_default(vtc_server: tuple[str, Summary]) -> None:
    url, _ = vtc_server
    chat = {"model": "default", "messages": [{"role": "user", "content": "the queue"}], "max_tokens": 2}
    before = {c: requests_of(url, c) for c in ("hdr", "usr", "default")}
    assert post(url, "/v1/chat/completions", {**chat, "user": "usr"}, {"X-Client-Id": "hdr"})[0] == 200
    assert post(url, "/v1/chat/completions", {**chat, "user": "usr", "stream": True})[0] == 200
    assert post(url, "/generate", {"text": "the", "sampling_params": {"max_new_tokens": 2}})[0] == 200
    after = {c: requests_eventually(url, c, before[c] + 1) for c in ("hdr", "usr", "default")}
    assert after == {c: before[c] + 1 for c in before}


def test_bench_writes_the_sim_keys_from_a_real_server(vtc_server: tuple[str, Summary],
                                                     tmp_path: Path) -> None:
    """``sglang-fair bench`` against this server (it had a module, and a server, of its own): a few
    seconds of Tree-of-Thoughts by two clients of its own."""
    pytest.importorskip("aiohttp")
    url, out = vtc_server[0], tmp_path / "real.json"
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
