"""``sglang-fair serve --load-balance-method POLICY``: the argument plan, the checks, the router command."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from sglang_fair.cli import build_parser
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.routing import RouterConfig
from sglang_fair.sglang_plugin.config import build_config
from sglang_fair.sglang_plugin.router_launch import KV_EVENTS, check_router_args, plan_router
from sglang_fair.sglang_plugin.router_link import (
    ENV_ROUTER,
    ROUTER_METHODS,
    RouterLink,
    RouterSettings,
    link_from_env,
    router_command,
    router_settings,
)
from sglang_fair_router.config import ServiceConfig


def test_router_methods_are_the_core_routing_policies() -> None:
    assert set(ROUTER_METHODS) == {"d2lpm", "round_robin", "shortest_queue", "client_rr", "cache_aware",
                                   "preble", "d2lpm_guarded", "fair_cache_aware", "pab", "per_server"}


@pytest.mark.parametrize("form", [["--load-balance-method", "d2lpm"], ["--load-balance-method=d2lpm"]])
def test_a_router_method_becomes_round_robin_plus_the_eviction_feed(form: list[str]) -> None:
    plan = plan_router(["--model-path", "m", *form, "--dp-size", "2"])
    assert plan.policy == "d2lpm"
    assert "d2lpm" not in " ".join(plan.sglang_args)
    assert plan.sglang_args[-2:] == ["--kv-events-config", KV_EVENTS]
    assert json.loads(KV_EVENTS) == {"publisher": "sglang_fair", "endpoint": ""}


def test_sglang_methods_and_no_method_pass_through_untouched() -> None:
    for args in (["--dp-size", "2"], ["--load-balance-method", "total_tokens", "--dp-size", "2"]):
        plan = plan_router(args)
        assert plan.policy is None and plan.sglang_args == args


def test_own_kv_events_config_conflicts_with_the_router() -> None:
    with pytest.raises(ConfigError, match="drop --kv-events-config"):
        plan_router(["--load-balance-method", "d2lpm", "--kv-events-config", "{}"])


def test_checks_on_the_parsed_sglang_flags() -> None:
    plan = plan_router(["--load-balance-method", "d2lpm"])
    ok = SimpleNamespace(dp_size=2, enable_dp_attention=False, nnodes=1, sleep_on_idle=False)
    assert check_router_args(plan, ok) == plan
    with pytest.raises(ConfigError, match="needs --dp-size >= 2"):
        check_router_args(plan, SimpleNamespace(dp_size=1))
    assert check_router_args(plan_router(["--load-balance-method", "round_robin"]),
                             SimpleNamespace(dp_size=1)).policy is None  # SGLang's own, one worker
    for bad, words in (({"enable_dp_attention": True}, "dp-attention"), ({"nnodes": 2}, "one node"),
                       ({"sleep_on_idle": True}, "sleep-on-idle")):
        with pytest.raises(ConfigError, match=words):
            check_router_args(plan, SimpleNamespace(**{**vars(ok), **bad}))


def test_router_flags_are_validated() -> None:
    def serve_flags(*argv: str) -> RouterSettings:
        return router_settings(build_parser().parse_args(["serve", *argv]))

    with pytest.raises(ConfigError, match=r"quantum \(Q\^w\) must be > 0"):
        serve_flags("--router-quantum", "0")
    with pytest.raises(ConfigError, match="heartbeat"):
        serve_flags("--router-heartbeat-interval", "5", "--router-heartbeat-timeout", "3")
    settings = serve_flags("--router-quantum", "512", "--router-stall-timeout", "9")
    assert (settings.routing.quantum, settings.service.stall_timeout) == (512.0, 9.0)


def test_link_round_trips_through_the_environment() -> None:
    link = RouterLink("/tmp/x", 3, 0.25)
    assert link_from_env({ENV_ROUTER: link.to_env()}) == link and link_from_env({}) is None
    assert link.workers() == ["ipc:///tmp/x/worker-0", "ipc:///tmp/x/worker-1", "ipc:///tmp/x/worker-2"]


def test_router_command_is_accepted_by_the_router_cli() -> None:
    """serve writes its --router-... settings back as the router process's flags of the same names."""
    link = RouterLink("/tmp/x", 2)
    settings = RouterSettings(RouterConfig(quantum=123.0, cache_threshold=0.4),
                              ServiceConfig(heartbeat_timeout=4.0, http_port=8111))
    args = build_parser().parse_args(router_command(link, "preble", settings, CostModel(w_e=1.5, w_q=3)))
    assert (args.router_policy, args.router_quantum, args.router_cache_threshold) == ("preble", 123.0, 0.4)
    assert (args.router_heartbeat_timeout, args.router_http_port) == (4.0, 8111)
    assert args.router_http_host == "127.0.0.1"
    assert args.router_workers == ",".join(link.workers()) and args.router_feedback == link.feedback
    assert (args.w_e, args.w_q) == (1.5, 3.0)


def test_the_router_gets_every_client_weight(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-1 team,x 3\nsk-2 bob\n")
    config = build_config({"client_weights": "alice=2", "client_keys": str(keys), "w_q": 4.0})
    link = RouterLink("/tmp/x", 2)
    args = build_parser().parse_args(router_command(link, "d2lpm", RouterSettings(), config.cost()))
    assert args.client_weights == {"alice": 2.0, "team,x": 3.0}
    assert (args.w_e, args.w_q) == (1.0, 4.0)


def test_serve_help_lists_router_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    out = capsys.readouterr().out
    assert "--router-quantum" in out and "--router-heartbeat-timeout" in out and "d2lpm" in out


def test_private_dirs_of_dead_owners_are_swept(tmp_path: Path) -> None:
    import subprocess
    import sys

    from sglang_fair.sglang_plugin.tmpdirs import OWNER, private_dir, sweep

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    stale, foreign = tmp_path / "sgl-fair-old", tmp_path / "sgl-fair-foreign"
    stale.mkdir()
    (stale / OWNER).write_text(dead.stdout.strip())
    foreign.mkdir()  # no owner file: not ours, left alone
    mine = Path(private_dir("sgl-fair-", str(tmp_path)))  # sweeps first
    assert not stale.exists() and foreign.exists() and (mine / OWNER).read_text() == str(os.getpid())
    assert sweep("sgl-fair-", str(tmp_path)) == 0 and mine.exists()  # its owner (this process) runs


@pytest.mark.parametrize(("code", "restarts"), [(3, True), (0, False)])
def test_a_failed_router_is_restarted_but_a_stopped_one_is_not(tmp_path: Path, code: int,
                                                               restarts: bool) -> None:
    import sys
    import time

    from sglang_fair.sglang_plugin.router_launch import RouterProcess

    # a stand-in router: makes the frontend socket file, counts its starts, exits with ``code``
    script = (f"import pathlib, sys, time; d = pathlib.Path({str(tmp_path)!r}); (d / 'frontend').touch(); "
              f"open(d / 'starts', 'a').write('x'); time.sleep(0.2); sys.exit({code})")
    router = RouterProcess([sys.executable, "-c", script], str(tmp_path))
    try:
        time.sleep(2.0)
        starts = len((tmp_path / "starts").read_text())
        assert (starts >= 2) == restarts and (router.restarts > 0) == restarts, (starts, router.restarts)
    finally:
        router.stop()
    assert not tmp_path.exists()
