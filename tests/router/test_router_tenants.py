"""The router's tenant file (``sglang_fair_router/tenants.py``, ``--router-client-keys``): its weights at
start and after a reload reach the routing policy's refills; an invalid file, or a weight against
``--client-weights``, is refused with its line and the weights in force stay; the real router process
reloads on a change and on SIGHUP and shows the weights in ``/state``."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.harness.server import free_port
from sglang_fair.routing import RouterConfig, RoutingPolicy, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router.tenants import start_cost, weights_reloader

pytestmark = pytest.mark.timers

FIRST = '[tenants.a]\nkeys = ["k-a"]\nweight = 2\n[tenants.b]\nkeys = ["k-b"]\n'
SECOND = '[tenants.a]\nkeys = ["k-a"]\nweight = 4\n[tenants.b]\nkeys = ["k-b"]\n'
INVALID = '[tenants.a]\nkeys = ["k-a"]\nweight = 8\n[tenants.b]\nkeys = ["k-b"]\nweigth = 3\n'
QUANTUM, TOKENS = 1000.0, 10
ROOT = Path(__file__).resolve().parents[2]


def rewrite(path: Path, text: str) -> None:
    """Write ``text`` with an mtime a second later (as an editor's save seen by a coarse clock)."""
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def refill_of(policy: RoutingPolicy, client: str) -> float:
    """What one D²LPM refill gave ``client``: its counter after its first request, plus the charge."""
    request = fm.Submit(f"{client}-{time.monotonic_ns()}", client, pack_tokens(list(range(TOKENS))))
    worker = policy.route(request)
    return policy.counter_view()[client][worker] + policy.config.cost.extend_cost(TOKENS)


def router(path: Path, policy: str = "d2lpm",
           flag: dict[str, float] | None = None) -> tuple[RoutingPolicy, Any]:
    cost, table = start_cost(CostModel(client_weights=flag or {}), str(path))
    routing = make_routing_policy(RouterConfig(policy, num_workers=2, quantum=QUANTUM, cost=cost))
    return routing, weights_reloader(str(path), table, flag or {}, routing)


def test_the_files_weights_are_the_routers_at_start_merged_with_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    policy, _ = router(path, flag={"c": 3.0})
    assert policy.config.cost.client_weights == {"a": 2.0, "c": 3.0}
    assert refill_of(policy, "a") == 2 * QUANTUM and refill_of(policy, "b") == QUANTUM
    with pytest.raises(ConfigError, match=r"weight 1.0 in --client-weights conflicts with weight 2.0"):
        router(path, flag={"a": 1.0})
    rewrite(path, INVALID)
    with pytest.raises(ConfigError, match=r"tenants.toml:4: tenant 'b': unknown field\(s\) weigth"):
        router(path)


def test_a_reloaded_weight_reaches_the_next_refill(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    policy, reloader = router(path)
    assert refill_of(policy, "a") == 2 * QUANTUM
    assert reloader.poll(1.0) is None  # unchanged: nothing happens
    rewrite(path, SECOND)
    outcome = reloader.poll(1.5)
    assert outcome is not None and outcome.applied == ("weights",) and not outcome.kept
    policy.forget("a")  # a new refill (a client that still holds credit spends it first)
    assert refill_of(policy, "a") == 4 * QUANTUM and policy.config.cost.client_weights == {"a": 4.0}


def test_an_invalid_file_or_a_conflict_is_refused_and_the_weights_stay(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    policy, reloader = router(path, flag={"b": 1.0})
    rewrite(path, INVALID)
    with caplog.at_level(logging.ERROR, logger="sglang_fair"):
        refused = reloader.poll(1.0)
    assert refused is not None and "tenants.toml:4" in refused.error
    assert "sglang-fair router: tenant file refused, the running configuration stays" in caplog.text
    rewrite(path, SECOND.replace('keys = ["k-b"]\n', 'keys = ["k-b"]\nweight = 5\n'))  # b=1 in the flag
    conflict = reloader.poll(2.0)
    assert conflict is not None and "conflicts" in conflict.error
    assert policy.config.cost.client_weights == {"a": 2.0, "b": 1.0}
    rewrite(path, SECOND)  # fixed: applied
    assert (reloader.poll(3.0) or conflict).applied == ("weights",)
    assert policy.config.cost.client_weights == {"a": 4.0, "b": 1.0}


def reload_before(policy: RoutingPolicy, weights: dict[str, float]) -> None:
    """The gateway's reload before ``set_client_weights``: the outer policy's config only."""
    policy.config = replace(policy.config, cost=replace(policy.config.cost, client_weights=weights))


def test_every_server_of_per_server_takes_the_weights(tmp_path: Path) -> None:
    """``per_server`` routes with one policy per server: each takes the reloaded weights. Negative
    control: the reload as the gateway did it before leaves the servers' weights as they were."""
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    policy, reloader = router(path, policy="per_server")
    control, _ = router(path, policy="per_server")
    rewrite(path, SECOND)
    assert reloader.poll(1.0) is not None
    reload_before(control, {"a": 4.0})
    servers = [*policy.servers, *control.servers]  # type: ignore[attr-defined]
    assert [p.config.cost.weight("a") for p in servers] == [4.0, 2.0]
    assert refill_of(policy, "a") == 4 * QUANTUM and refill_of(control, "a") == 2 * QUANTUM


def start_router(tmp_path: Path, path: Path, port: int) -> subprocess.Popen[bytes]:
    ep = lambda name: f"ipc://{tmp_path / name}"  # noqa: E731
    cmd = [sys.executable, "-m", "sglang_fair.cli", "router", "--router-frontend", ep("front"),
           "--router-failures", ep("fail"), "--router-feedback", ep("fb"),
           "--router-workers", f"{ep('w0')},{ep('w1')}", "--router-http-port", str(port),
           "--router-client-keys", str(path), "--client-weights", "c=3"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), str(ROOT / "router")])}
    with (tmp_path / "router.log").open("wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)


def weights_at(port: int, want: dict[str, float] | None = None, timeout: float = 20.0) -> dict[str, float]:
    """The router's weights in ``/state`` (once they are ``want``, if given, or ``timeout`` passed)."""
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/state", timeout=2) as answer:
                seen = json.load(answer)["weights"]
        except OSError:
            seen = None
        if seen is not None and (want is None or seen == want):
            return seen
        time.sleep(0.1)
    raise AssertionError(f"the router's weights: {seen}, waited for {want}")


def test_the_router_process_reloads_on_change_and_on_sighup_and_refuses_a_bad_file(tmp_path: Path) -> None:
    path, port = tmp_path / "tenants.toml", free_port()
    path.write_text(FIRST)
    proc = start_router(tmp_path, path, port)
    try:
        assert weights_at(port, {"a": 2.0, "c": 3.0}) == {"a": 2.0, "c": 3.0}
        rewrite(path, INVALID)
        time.sleep(1.5)  # three looks
        assert weights_at(port) == {"a": 2.0, "c": 3.0} and proc.poll() is None
        log = (tmp_path / "router.log").read_text()
        assert "tenant file refused, the running configuration stays" in log and "tenants.toml:4" in log
        rewrite(path, SECOND)
        changed = time.monotonic()
        weights_at(port, {"a": 4.0, "c": 3.0})
        assert time.monotonic() - changed < 5.0  # looked at every half second, /state every half second
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            assert 'sglang_fair_router_client_weight{client="a"} 4.0' in answer.read().decode()
        stamp = path.stat()
        path.write_text(FIRST)  # the same size, and the same mtime, as a coarse clock may leave it
        os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        time.sleep(1.5)
        assert weights_at(port) == {"a": 4.0, "c": 3.0}  # a look at the stamp alone misses it...
        proc.send_signal(signal.SIGHUP)
        weights_at(port, {"a": 2.0, "c": 3.0})  # ...SIGHUP reads it
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)
