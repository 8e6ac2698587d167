"""Lost ``Finished`` notices from real SGLang workers: the router reconciles its queue sizes.

The workers (``--dp-size 2`` behind the global router) leave every second ``Finished`` unsent
(``SGLANG_FAIR_FAULT_DROP_FINISHED=2``, fault injection); the router must still drain to nothing in
flight from the workers' heartbeats alone (``reconciled``), and count each request once: finished plus
reconciled equals dispatched. The control, a run without lost notices where nothing is reconciled, is
``test_router_e2e.py::test_router_state_after_the_run`` (``dispatched == finished``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fair_e2e_support import load_in_threads

from sglang_fair.harness.server import free_port, get_json, running_server
from sglang_fair.sglang_plugin.worker_hooks import ENV_DROP_FINISHED

pytestmark = [pytest.mark.e2e, pytest.mark.timers]


def test_lost_finished_notices_from_real_workers_are_reconciled(
        tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DROP_FINISHED, "2")
    router_port = free_port()
    args = ("--max-running-requests", "8", "--max-total-tokens", "4000",
            "--router-http-port", str(router_port))
    with running_server(tiny_model, args, tmp_path / "server.log", dp_size=2) as url:
        router = f"http://127.0.0.1:{router_port}"
        outcomes, threads = load_in_threads(url, [f"c{i % 3}" for i in range(16)], 70_000, 40, 16)
        for t in threads:
            t.join(120)
        assert [o.status for o in outcomes] == [200] * 16
        deadline = time.monotonic() + 30  # the router's view is refreshed every half second
        state: dict[str, Any] = get_json(router + "/state")
        while (state["inflight"] or state["counts"]["dispatched"] < 16) and time.monotonic() < deadline:
            time.sleep(0.5)
            state = get_json(router + "/state")
    counts = state["counts"]
    print("\nrouter counts with every second Finished lost:", counts)
    assert state["inflight"] == 0 and all(w["queue"] == 0 for w in state["workers"]), state["workers"]
    assert counts["dispatched"] >= 16 and counts["reconciled"] >= 1, counts  # and SGLang's warm-up
    assert counts["finished"] + counts["reconciled"] == counts["dispatched"], counts
