"""The router forgets clients without requests in flight after a TTL (bounded memory)."""

from __future__ import annotations

import pytest

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.state import RouterState

pytestmark = pytest.mark.timers

TTL = 60.0


def state(ttl: float = TTL) -> RouterState:
    return RouterState(make_routing_policy(RouterConfig("d2lpm", num_workers=2, quantum=100)), 3.0,
                       client_ttl=ttl)


def route(s: RouterState, rid: str, client: str, now: float) -> int:
    return s.submit(fm.Submit(rid, client, pack_tokens([7] * 30)), now)


def test_idle_clients_are_forgotten_and_come_back_as_new() -> None:
    s, fresh = state(), state()
    for i in range(1000):  # one request from each of 1,000 ids, as a client without keys may send
        w = route(s, f"r{i}", f"c{i}", now=i * 0.01)
        s.feedback(wm.Finished(w, f"r{i}", 4), now=i * 0.01 + 0.005)
    assert len(s.policy.deficits) == 1000  # type: ignore[attr-defined]
    assert s.expire(now=10.0 + TTL + 1) and s.policy.deficits == {}  # type: ignore[attr-defined]
    assert not s.clients.last_active and not s.clients.inflight and s.counts["forgotten_clients"] == 1000
    route(s, "again", "c0", now=100.0)
    route(fresh, "first", "c0", now=100.0)
    assert s.policy.deficits == fresh.policy.deficits  # type: ignore[attr-defined]


def test_a_client_with_requests_in_flight_is_kept() -> None:
    s = state()
    route(s, "long", "busy", now=0.0)
    assert s.expire(now=5 * TTL) == [] and "busy" in s.policy.deficits  # type: ignore[attr-defined]
    s.feedback(wm.Finished(0, "long", 1), now=5 * TTL)
    s.feedback(wm.Finished(1, "long", 1), now=5 * TTL)  # whichever worker it went to
    assert s.expire(now=6 * TTL + 1) == ["busy"]


def test_zero_ttl_keeps_everyone() -> None:
    s = state(ttl=0.0)
    route(s, "r", "c", now=0.0)
    assert s.expire(now=1e9) == [] and "c" in s.policy.deficits  # type: ignore[attr-defined]


def test_serve_passes_its_client_ttl_and_none_with_keys(tmp_path: object) -> None:
    from pathlib import Path

    from sglang_fair.cli import build_parser
    from sglang_fair.sglang_plugin.config import build_config
    from sglang_fair.sglang_plugin.router_launch import with_client_ttl
    from sglang_fair.sglang_plugin.router_link import RouterLink, RouterSettings, router_command

    keys = Path(str(tmp_path)) / "keys.txt"
    keys.write_text("sk-1 alice\n")
    link = RouterLink("/tmp/x", 2)
    for values, ttl in (({"client_ttl": 30.0}, 30.0), ({"client_ttl": 30.0, "client_keys": str(keys)}, 0.0)):
        config = build_config(values)
        settings = with_client_ttl(RouterSettings(), config)
        args = build_parser().parse_args(router_command(link, "d2lpm", settings, config.cost()))
        assert args.router_client_ttl == ttl


@pytest.mark.parametrize(("policy", "table"), [("d2lpm", "deficits"), ("d2lpm_guarded", "deficits"),
                                               ("client_rr", "next"), ("fair_cache_aware", "deficits"),
                                               ("fair_cache_aware", "sizes")])
def test_every_routing_policy_forgets_its_per_client_state(policy: str, table: str) -> None:
    s = RouterState(make_routing_policy(RouterConfig(policy, num_workers=2)), 3.0, client_ttl=TTL)
    for i in range(50):
        w = route(s, f"r{i}", f"c{i}", now=0.0)
        s.feedback(wm.Finished(w, f"r{i}", 1), now=0.1)
    assert len(getattr(s.policy, table)) == 50
    s.expire(now=TTL + 1)
    assert len(getattr(s.policy, table)) == 0
