"""``sglang-fair serve --dp-size 2`` with no policy flag: the global router runs ``fair_cache_aware`` and the
workers ``dlpm_light``, over real HTTP and ZMQ on SGLang's CPU engine.

The data-parallel scenario of :mod:`sglang_fair.harness.dp_scenario` (one client's shared-prefix programs,
two light clients, their keys from a tenant file) runs for a short window; every request is answered, the
heavy programs are served from the prefix cache on both workers, and the router's and the schedulers' views
name the default policies. Then a tenant's weight is changed in the file: the router and the schedulers
run the new one, without a restart, and an invalid file after it is refused by the router.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fair_e2e_support import post

from sglang_fair.harness.dp_scenario import DPWorkload, run_dp_scenario
from sglang_fair.harness.server import free_port, get_json, running_server

pytestmark = pytest.mark.e2e

WINDOW_S = 10.0
SERVER = ("--max-running-requests", "8", "--max-total-tokens", "4500")  # as test_router_e2e.py
KEYS = {"heavy": "key-heavy", "light-1": "key-light-1", "light-2": "key-light-2", "ops": "key-ops"}
ADMIN = {"Authorization": "Bearer key-ops"}  # /fairness and /fairness/router need a --fairness-admins key


def tenant_file(light_weight: float, typo: str = "") -> str:
    """Every client's key; ``light-1`` with ``light_weight`` (``typo``: a line that makes it invalid)."""
    extra = {"light-1": f"weight = {light_weight:g}\n{typo}"}
    return "".join(f'[tenants.{c}]\nkeys = ["{k}"]\n{extra.get(c, "")}' for c, k in KEYS.items())


def waited(read: Callable[[], Any], want: Any, timeout: float = 15.0) -> tuple[Any, float]:
    """``read()`` once it equals ``want`` (or at ``timeout``), and the seconds it took."""
    start = time.monotonic()
    seen = read()
    while seen != want and time.monotonic() - start < timeout:
        time.sleep(0.1)
        seen = read()
    return seen, time.monotonic() - start


def reload_weight(url: str, router: str, keys: Path) -> dict[str, Any]:
    """light-1's weight 2 -> 3 in the file: the seconds until the router's ``/state`` and a scheduler
    (``/fairness``, after light-1's next requests) show it; then an invalid file, which the router keeps
    its weights through."""
    weights = lambda: get_json(router + "/state")["weights"]  # noqa: E731
    out: dict[str, Any] = {"before": weights()}
    keys.write_text(tenant_file(3))
    out["router"], out["router_s"] = waited(weights, {"light-1": 3.0})
    light = {"Authorization": f"Bearer {KEYS['light-1']}"}
    body = {"text": "the reload", "sampling_params": {"max_new_tokens": 4}}
    out["served"] = [post(url, "/generate", body, light)[0] for _ in range(4)]
    row = lambda: get_json(url + "/fairness", headers=ADMIN)["clients"]["light-1"]["weight"]  # noqa: E731
    out["scheduler"], out["scheduler_s"] = waited(row, 3.0)
    keys.write_text(tenant_file(4, typo="weigth = 5\n"))
    time.sleep(2.0)  # four of the router's looks
    out["after_invalid"] = weights()
    return out


@pytest.fixture(scope="module")
def served(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    router_port = free_port()
    tmp = tmp_path_factory.mktemp("default-router")
    keys, log = tmp / "tenants.toml", tmp / "server.log"
    keys.write_text(tenant_file(2))
    args = (*SERVER, "--router-http-port", str(router_port), "--client-keys", str(keys),
            "--fairness-admins", "ops")
    with running_server(tiny_model, args, log, dp_size=2) as url:
        summary = run_dp_scenario(url, DPWorkload(keys=KEYS), WINDOW_S)
        print("\ndefault pair", json.dumps(summary.row()))
        router = f"http://127.0.0.1:{router_port}"
        out = {"summary": summary, "state": get_json(router + "/state"),
               "fairness": get_json(url + "/fairness", headers=ADMIN),
               "main_port": get_json(url + "/fairness/router", headers=ADMIN)}
        out["reload"] = reload_weight(url, router, keys)
        print("reload", json.dumps(out["reload"]))
        return {**out, "log": log.read_text(errors="replace")}


def test_no_policy_flag_runs_the_fair_router_and_dlpm_light(served: dict[str, Any]) -> None:
    assert served["state"]["policy"] == "fair_cache_aware", served["state"]
    assert served["fairness"]["policy"] == "dlpm_light" and served["fairness"]["schedulers"] == 2


def test_the_router_is_seen_on_the_main_port_and_serve_bound_the_cpu_ranks(served: dict[str, Any]) -> None:
    """``GET /fairness/router`` needs no ``--router-http-port``; the harness no longer sets
    ``SGLANG_CPU_OMP_THREADS_BIND`` for ``serve``, which picks one core range per worker itself."""
    main = served["main_port"]
    assert main["policy"] == "fair_cache_aware" and len(main["workers"]) == 2, main
    assert main["counts"]["dispatched"] > 0, main
    assert "sglang-fair: SGLANG_CPU_OMP_THREADS_BIND=" in served["log"]


def test_the_default_pair_serves_everyone_from_the_cache(served: dict[str, Any]) -> None:
    """The heavy client keeps 32 requests over five programs in flight, four times what the two workers run:
    its load needs both, so a program may be held by both (locality measured 0.60-0.76, not the 0.9 of a
    router that pins programs) and what counts is that the prompts are served from the cache: 0.87-0.88 of
    every worker's prompt tokens measured (at most ~0.97: the light clients' prompts are new)."""
    summary = served["summary"]
    assert all(summary.done[c] > 0 for c in ("heavy", "light-1", "light-2")), summary.row()
    assert sorted(summary.hit_rate_per_worker) == [0, 1], summary.row()  # both workers served
    assert min(summary.hit_rate_per_worker.values()) >= 0.75, summary.row()
    counts = served["state"]["counts"]
    assert counts["dispatched"] > 0 and counts["failed"] == counts["dropped"] == 0, counts


def test_a_weight_changed_in_the_file_reaches_the_router_and_the_schedulers(served: dict[str, Any]) -> None:
    """The router reads the tenant file itself (``--router-client-keys``, given by ``serve``): its
    ``/state`` shows the new weight within a couple of its half-second looks, the schedulers show it
    after light-1's next requests, and an invalid file is refused with its line while the weights stay."""
    reload = served["reload"]
    assert reload["before"] == {"light-1": 2.0}, reload
    assert reload["router"] == {"light-1": 3.0} and reload["router_s"] < 5.0, reload
    assert reload["served"] == [200] * 4 and reload["scheduler"] == 3.0, reload
    assert reload["after_invalid"] == {"light-1": 3.0}, reload
    assert "sglang-fair router: tenant file refused, the running configuration stays" in served["log"]
    assert "tenants.toml:3: tenant 'light-1': unknown field(s) weigth" in served["log"]
    assert "cannot change here while serving" not in served["log"]
