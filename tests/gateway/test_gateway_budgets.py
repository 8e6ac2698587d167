"""The tenant file's budgets at the gateway: a tenant over its budget gets 429 with Retry-After and the
edge's error body before anything is relayed, ``/gateway/state`` shows what it used; two replicas that
hear each other's dispatches and finishes (what ``replication.py`` hands the router) enforce one budget,
not twice it (negative control: two replicas that do not hear each other let through twice as much)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
import aiohttp
from fake_sglang import FakeSGLang, Running
from test_gateway import CHAT, config, gateway_at, run

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.edge.budgets import Budget, BudgetBook, OverBudget
from sglang_fair.edge.keys import load_key_file
from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.gateway.servers import ServerInfo, WorkerTable
from sglang_fair.routing import RouterConfig, make_routing_policy

pytestmark = pytest.mark.timers
TABLE = WorkerTable([ServerInfo("http://a:1", "tiny", 2), ServerInfo("http://b:1", "tiny", 2)])


def replicas(budget: Budget, now: list[float]) -> list[GatewayRouter]:
    return [GatewayRouter(make_routing_policy(RouterConfig(policy="fair_cache_aware", num_workers=4)), TABLE,
                          clock=lambda: now[0], budgets=BudgetBook({"t": budget})) for _ in range(2)]


@pytest.mark.parametrize("shared", [True, False], ids=["peers-heard", "negative-control-not-heard"])
def test_a_tenant_at_twice_its_budget_through_two_replicas_gets_its_budget(shared: bool) -> None:
    rng, now = random.Random(5), [0.0]
    rpm, seconds = 120, 120.0
    routers = replicas(Budget(rpm, 0), now)
    served = 0
    while now[0] < seconds:  # 2x the budget, alternately through either replica
        here, there = routers[served % 2], routers[1 - served % 2]
        tokens = [rng.randint(1, 300) for _ in range(rng.randint(8, 64))]
        try:
            ticket = here.route("t", tokens)
        except OverBudget:
            pass
        else:
            served += 1
            if shared:
                there.observe(ticket.rid, "t", ticket.worker.index, pack_tokens(tokens))
            here.finish(ticket, 16)
            if shared:
                there.finish(there.peer_ticket(ticket.worker.index, "t", ticket.rid), 16)
        now[0] += rng.expovariate(2 * rpm / 60.0)
    budget = rpm * seconds / 60.0
    if shared:
        assert abs(served - budget) <= 0.1 * budget, served
    else:
        assert served > 1.5 * budget, served


def test_tokens_in_and_out_are_charged_at_both_replicas() -> None:
    now = [0.0]
    one, two = replicas(Budget(0, 1000), now)
    ticket = one.route("t", list(range(400)))
    two.observe(ticket.rid, "t", ticket.worker.index, pack_tokens(list(range(400))))
    one.finish(ticket, 600)
    two.finish(two.peer_ticket(ticket.worker.index, "t", ticket.rid), 600)
    for router in (one, two):
        assert router.state()["budgets"]["t"]["tokens_used"] == 1000
        with pytest.raises(OverBudget):
            router.route("t", [1, 2])
    now[0] = 60.0
    one.route("t", [1, 2])
    one.route("u", [1, 2])  # a tenant without a budget is never refused


def test_a_tenant_over_its_budget_gets_429_with_retry_after_and_nothing_is_relayed(tmp_path: Path) -> None:
    (tmp_path / "tenants.toml").write_text(
        '[tenants.small]\nkeys = ["k-small"]\nrequests_per_minute = 2\n[tenants.big]\nkeys = ["k-big"]\n')
    path = str(tmp_path / "tenants.toml")
    fake = FakeSGLang()
    with Running(fake) as urls:
        async def scenario() -> None:
            cfg = config(urls, client_keys=path, key_table=load_key_file(path))
            async with gateway_at(cfg) as (gw, _), aiohttp.ClientSession() as s:
                statuses = []
                for key in ("k-small", "k-small", "k-small", "k-big"):
                    async with s.post(gw + "/v1/chat/completions", json=CHAT,
                                      headers={"Authorization": f"Bearer {key}"}) as resp:
                        statuses.append(resp.status)
                        if resp.status == 429:
                            body = await resp.json()
                            assert 50 <= int(resp.headers["retry-after"]) <= 60
                            assert body["type"] == "TooManyRequests"
                            assert "2 requests per minute" in body["message"]
                assert statuses == [200, 200, 429, 200]
                async with s.get(gw + "/gateway/state") as resp:
                    used = (await resp.json())["budgets"]["small"]
                assert used["requests_used"] == 2 and used["requests_left"] == 0

        run(scenario)
    assert len(fake.relayed()) == 3
