"""Accounting across retractions (SGLang's own test switch forces them): nothing charged twice, nothing
forgotten. Every request asks for exactly ``OUT`` tokens (``ignore_eos``), so after the queue drains
each client's output tokens must equal requests * OUT however often its requests were retracted."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fair_e2e_support import wait_idle

from sglang_fair.harness.closed_loop import ClientSpec, run_load
from sglang_fair.harness.scenario import words
from sglang_fair.harness.server import get_json, running_server

pytestmark = pytest.mark.e2e
OUT, W_E, W_Q = 200, 1.0, 2.0


def test_retracted_requests_are_charged_once(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_TEST_RETRACT", "1")  # retract a running request every 25 steps
    monkeypatch.setenv("SGLANG_TEST_RETRACT_INTERVAL", "25")
    log = tmp_path / "server.log"
    args = ("--schedule-policy", "dlpm", "--max-running-requests", "32", "--max-total-tokens", "20000",
            "--fair-quantum", "256", "--log-level", "info")

    def prompt(c: int) -> Callable[[int], str]:
        return lambda i: words(50_000 + 1000 * c + i, 150)

    specs = [ClientSpec(f"c{c}", 12, prompt(c), OUT) for c in range(2)]
    with running_server(tiny_model, args, log) as url:
        results, _ = run_load(url, specs, 10.0)
        time.sleep(1.0)
        wait_idle(url)
        clients = get_json(url + "/fairness")["clients"]
    retractions = log.read_text().count("Testing retraction. #retracted_reqs")
    assert retractions >= 3, "SGLang did not retract: the test would prove nothing"
    for name, result in results.items():
        c = clients[name]
        assert c["requests"] == len(result.outcomes), (name, c)
        assert (c["waiting"], c["running"]) == (0, 0), c
        assert c["output_tokens"] == c["requests"] * OUT, c
        expected = W_E * (c["input_tokens"] - c["cached_tokens"]) + W_Q * c["output_tokens"]
        assert c["service"] == pytest.approx(expected), c
