"""VTC in the real SGLang server; client identity from header, OpenAI ``user`` and the default."""

from __future__ import annotations

import json
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
    args = ("--schedule-policy", "vtc", *MAX_RUNNING, "--client-weights", "medium=2")
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
