"""``serve``'s reload (``sglang_plugin/tenant_reload.py``): a scheduler applies the file's weights and
bands to its admission policy; what needs a restart (weights under an unfair policy, bands under a
policy without them) is kept; a weight conflicting with ``--client-weights`` is refused whole; under the
global router, the router ``serve`` starts reloads the same weights, so it and every scheduler agree."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from sglang_fair.admission import AdmissionPolicy, make_admission_policy
from sglang_fair.core.cost import CostModel
from sglang_fair.routing import RoutingPolicy
from sglang_fair.sglang_plugin.config import FairConfig, build_config
from sglang_fair.sglang_plugin.router_launch import with_tenant_file
from sglang_fair.sglang_plugin.router_link import RouterLink, RouterSettings, router_command
from sglang_fair.sglang_plugin.state import FairState
from sglang_fair.sglang_plugin.tenant_reload import live_parts, scheduler_reloader
from sglang_fair_router import cli as router_cli

FIRST = '[tenants.a]\nkeys = ["k-a"]\nweight = 2\n[tenants.b]\nkeys = ["k-b"]\n'
SECOND = '[tenants.a]\nkeys = ["k-a"]\nweight = 4\n[tenants.b]\nkeys = ["k-b"]\nband = "batch"\n'


def rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_live_parts_follow_the_policy() -> None:
    banded = {"bands", "request_priority"}
    assert live_parts("dlpm_light") == {"clients", "budgets", "weights", *banded}
    assert live_parts("vtc") == {"clients", "budgets", "weights"}
    assert live_parts("lpm") == {"clients", "budgets"}


def test_a_scheduler_applies_the_new_weights_and_bands(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    config = build_config({"client_keys": str(path)})
    policy = make_admission_policy(config.for_policy("dlpm"))
    state = FairState(policy)
    reloader = scheduler_reloader(config, "dlpm", policy, state)
    assert reloader is not None and policy.cost.weight("a") == 2.0
    rewrite(path, SECOND)
    outcome = reloader.poll(100.0)
    assert outcome is not None and outcome.applied == ("weights", "bands")
    assert policy.cost.weight("a") == 4.0 and state.cost.weight("a") == 4.0
    assert policy.bands.band("b") == 2 and policy.bands.enabled  # type: ignore[attr-defined]


def test_a_weight_against_the_flag_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    config = build_config({"client_keys": str(path), "client_weights": "a=2"})
    policy = make_admission_policy(config.for_policy("dlpm_light"))
    reloader = scheduler_reloader(config, "dlpm_light", policy, FairState(policy))
    assert reloader is not None
    rewrite(path, SECOND)
    refused = reloader.poll(100.0)  # weight 4 against --client-weights a=2
    assert refused is not None and "conflicts" in refused.error and policy.cost.weight("a") == 2.0


def router_from(link: RouterLink, settings: RouterSettings, cost: CostModel) -> tuple[RoutingPolicy, Any]:
    """The routing policy and tenant reloader of the router process ``serve`` starts with these: its
    command line parsed and built as ``sglang-fair router`` does."""
    parser = argparse.ArgumentParser()
    router_cli.register(parser.add_subparsers(dest="command"))
    _, policy, reloader = router_cli.build(parser.parse_args(router_command(link, "d2lpm", settings, cost)))
    return policy, reloader


def schedulers(config: FairConfig, n: int) -> list[tuple[AdmissionPolicy, Any]]:
    out = []
    for _ in range(n):
        policy = make_admission_policy(config.for_policy("dlpm_light"))
        out.append((policy, scheduler_reloader(config, "dlpm_light", policy, FairState(policy))))
    return out


def test_under_the_router_a_reloaded_weight_reaches_the_router_and_every_scheduler(tmp_path: Path) -> None:
    """``serve --dp-size 2`` gives its router the tenant file and ``--client-weights`` apart; after a
    reload the router's routing policy and both schedulers run the file's new weight. Negative control:
    the router as ``serve`` started it before (the merged weights on its command line, no file) keeps
    the old weight while the schedulers run the new one."""
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    config = build_config({"client_keys": str(path), "client_weights": "c=3"})
    link = RouterLink(str(tmp_path), 2)
    settings, cost = with_tenant_file(RouterSettings(), config, "dlpm_light")
    assert settings.service.client_keys == str(path) and cost.client_weights == {"c": 3.0}
    router, reloader = router_from(link, settings, cost)
    before, no_reloader = router_from(link, RouterSettings(), config.cost())  # the old start
    workers = schedulers(config, 2)

    def weights(policy: Any) -> tuple[float, float]:
        cost = policy.config.cost if isinstance(policy, RoutingPolicy) else policy.cost
        return cost.weight("a"), cost.weight("c")

    assert {weights(p) for p in (router, before, *(w for w, _ in workers))} == {(2.0, 3.0)}
    rewrite(path, SECOND)
    for r in (reloader, *(r for _, r in workers)):
        outcome = r.poll(100.0)
        assert outcome is not None and "weights" in outcome.applied and not outcome.kept
    assert {weights(p) for p in (router, *(w for w, _ in workers))} == {(4.0, 3.0)}
    assert no_reloader is None and weights(before) == (2.0, 3.0), "the old router must disagree"


def test_under_an_unfair_policy_the_router_keeps_its_start_weights(tmp_path: Path) -> None:
    """With ``lpm`` the schedulers keep the weights (no weights live): the router gets no file."""
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST.replace("weight = 2\n", ""))
    config = build_config({"client_keys": str(path)})
    settings, cost = with_tenant_file(RouterSettings(), config, "lpm")
    assert settings.service.client_keys == "" and cost == config.cost()
    assert with_tenant_file(RouterSettings(), build_config({}), "dlpm_light")[0].service.client_keys == ""
