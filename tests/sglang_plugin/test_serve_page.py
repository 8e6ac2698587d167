"""The fairness page in ``serve``'s HTTP process: what a key may read, the workers from the schedulers'
files, the bound of the router the launcher started."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from page_support import FAIRNESS

from sglang_fair.edge.config import EdgeConfig
from sglang_fair.edge.identity import SCOPE_KEY
from sglang_fair.edge.keys import parse_key_lines
from sglang_fair.edge.trust import TRUST_KEY
from sglang_fair.sglang_plugin.config import FairConfig
from sglang_fair.sglang_plugin.fairness_page import STALL_S, ServePage, page_for_server, scheduler_workers


def test_the_serve_page_decides_access_as_fairness_does(tmp_path: Path) -> None:
    keys = parse_key_lines(["k-a a", "k-ops ops"], "keys")
    config = FairConfig(edge=EdgeConfig(key_table=keys, fairness_admins="ops"))
    keyed = ServePage(config, tmp_path, {}, lambda: 2048)
    assert keyed.allowed({"state": {SCOPE_KEY: "a"}}) == {"a"}
    assert keyed.allowed({"state": {SCOPE_KEY: "ops"}}) is None
    assert keyed.allowed({"state": {SCOPE_KEY: "__gateway__", TRUST_KEY: True}}) is None
    assert keyed.allowed({}) == set()
    assert ServePage(FairConfig(), tmp_path, {}, lambda: None).allowed({}) is None


def test_workers_are_serving_idle_or_stalled_by_their_last_published_step(tmp_path: Path) -> None:
    def write(rank: int, clients: dict[str, Any], age: float) -> None:
        path = tmp_path / f"scheduler-{rank}.json"
        path.write_text(json.dumps({"policy": "dlpm_light", "clients": clients}))
        os.utime(path, (1e9 - age, 1e9 - age))

    write(0, FAIRNESS, 1.0)
    write(1, {}, 500.0)
    write(2, {"x": {"waiting": 2, "running": 0}}, STALL_S + 5)
    rows = scheduler_workers(tmp_path, 1e9)
    assert [(r["name"], r["queue"], r["state"]) for r in rows] == [
        ("worker 0", 6, "serving"), ("worker 1", 0, "idle"), ("worker 2", 2, "stalled")]
    assert "no step published" in rows[2]["why"]


def test_the_serve_page_states_the_bound_of_the_router_the_launcher_started(monkeypatch: Any,
                                                                           tmp_path: Path) -> None:
    """With the global router SGLang's own --load-balance-method reads round_robin (the launcher hands the
    routing to the router): the page takes the router's policy from the link the launcher exported."""
    from types import SimpleNamespace

    from sglang_fair.sglang_plugin.config import ENV_STATE_DIR
    from sglang_fair.sglang_plugin.router_link import ENV_ROUTER, RouterLink

    (tmp_path / "scheduler-0.json").write_text(json.dumps({"policy": "dlpm_light", "clients": FAIRNESS,
                                                          "quantum": 5000.0}))
    monkeypatch.setenv(ENV_STATE_DIR, str(tmp_path))
    args = SimpleNamespace(dp_size=2, load_balance_method="round_robin")
    monkeypatch.setenv(ENV_ROUTER, RouterLink("/tmp/x", 2, policy="fair_cache_aware").to_env())
    page = page_for_server(args, FairConfig())
    monkeypatch.setattr(page, "context_len", lambda: 100)
    bound = page.data(None)["bound"]
    assert page.policy_args == {"dp_size": 2, "router": "fair_cache_aware"}
    assert (bound["source"], bound["value"]) == ("[1] Thm 5.1", 2 * 2 * (3 * 100 + 5000))
    monkeypatch.delenv(ENV_ROUTER)
    assert page_for_server(args, FairConfig()).policy_args["router"] == "round_robin"


def test_a_quantum_in_time_is_bounded_with_what_the_workers_published(tmp_path: Path) -> None:
    """dlpm_light's Q^u is seconds of the worker's measured service: the page takes the largest Q^u the
    schedulers published, and states no figure before one has (not the units default)."""
    page = ServePage(FairConfig(), tmp_path, {"dp_size": 2, "router": "fair_cache_aware"}, lambda: 100)
    write = (tmp_path / "scheduler-{}.json").as_posix().format
    for rank, published in ((0, None), (1, None)):
        Path(write(rank)).write_text(json.dumps({"policy": "dlpm_light", "clients": FAIRNESS,
                                                 "quantum": published}))
    assert page.data(None)["bound"]["value"] is None
    for rank, published in ((0, 1200.0), (1, 3000.0)):
        Path(write(rank)).write_text(json.dumps({"policy": "dlpm_light", "clients": FAIRNESS,
                                                 "quantum": published}))
    assert page.data(None)["bound"]["value"] == 2 * 2 * (3 * 100 + 3000)
    assert page.params("dlpm", None)["quantum"] == 4096  # a quantum in units: the configured one
