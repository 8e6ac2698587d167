"""``serve``'s reload (``sglang_plugin/tenant_reload.py``): a scheduler applies the file's weights and
bands to its admission policy; what needs a restart (weights under the global router or an unfair
policy, bands under a policy without them) is kept; a weight conflicting with ``--client-weights`` is
refused whole."""

from __future__ import annotations

import os
from pathlib import Path

from sglang_fair.admission import make_admission_policy
from sglang_fair.sglang_plugin.config import build_config
from sglang_fair.sglang_plugin.state import FairState
from sglang_fair.sglang_plugin.tenant_reload import live_parts, scheduler_reloader

FIRST = '[tenants.a]\nkeys = ["k-a"]\nweight = 2\n[tenants.b]\nkeys = ["k-b"]\n'
SECOND = '[tenants.a]\nkeys = ["k-a"]\nweight = 4\n[tenants.b]\nkeys = ["k-b"]\nband = "batch"\n'


def rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_live_parts_follow_the_policy_and_the_router() -> None:
    banded = {"bands", "request_priority"}
    assert live_parts("dlpm_light", router=False) == {"clients", "budgets", "weights", *banded}
    assert live_parts("dlpm_light", router=True) == {"clients", "budgets", *banded}
    assert live_parts("vtc", router=False) == {"clients", "budgets", "weights"}
    assert live_parts("lpm", router=False) == {"clients", "budgets"}


def test_a_scheduler_applies_the_new_weights_and_bands(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    config = build_config({"client_keys": str(path)})
    policy = make_admission_policy(config.for_policy("dlpm"))
    state = FairState(policy)
    reloader = scheduler_reloader(config, "dlpm", policy, False, state)
    assert reloader is not None and policy.cost.weight("a") == 2.0
    rewrite(path, SECOND)
    outcome = reloader.poll(100.0)
    assert outcome is not None and outcome.applied == ("weights", "bands")
    assert policy.cost.weight("a") == 4.0 and state.cost.weight("a") == 4.0
    assert policy.bands.band("b") == 2 and policy.bands.enabled  # type: ignore[attr-defined]


def test_under_the_router_the_weights_are_kept_and_a_conflict_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    config = build_config({"client_keys": str(path), "client_weights": "a=2"})
    policy = make_admission_policy(config.for_policy("dlpm_light"))
    routed = scheduler_reloader(config, "dlpm_light", policy, True, FairState(policy))
    alone = scheduler_reloader(config, "dlpm_light", policy, False, FairState(policy))
    assert routed is not None and alone is not None
    rewrite(path, SECOND)
    kept = routed.poll(100.0)
    assert kept is not None and kept.kept == ("weights",) and policy.cost.weight("a") == 2.0
    refused = alone.poll(100.0)  # weight 4 against --client-weights a=2
    assert refused is not None and "conflicts" in refused.error and policy.cost.weight("a") == 2.0
