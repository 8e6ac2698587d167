"""The gateway's background duties are never silently gone: each one made to raise (the health watch,
the client expiry, the feedback listener, the liveness check, the replica link) is logged, counted in
``/metrics`` and ``/gateway/state``, and runs again; a duty that keeps failing ends ``sglang-fair
gateway`` with a non-zero status (its supervisor restarts it)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
import aiohttp
from fake_sglang import FakeSGLang, Running
from test_feedback import Beating, keys  # noqa: F401  (the fixture)
from test_gateway import config, gateway_at, run

from sglang_fair.gateway import launch
from sglang_fair.gateway.app import Gateway
from sglang_fair.gateway.duties import EXIT_DUTY_FAILED, Duties
from sglang_fair.gateway.peers import PeerConfig
from sglang_fair.gateway.supervision import ServerSupervisor
from sglang_fair.harness.server import free_port
from sglang_fair.links.curve import gateway_keys

pytestmark = pytest.mark.timers


def failing_once(calls: list[int], real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, except that its first call raises (an async ``real`` raises when awaited)."""
    def fault() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a fault injected by the test")

    if asyncio.iscoroutinefunction(real):
        async def async_call(*args: Any, **kwargs: Any) -> Any:
            fault()
            return await real(*args, **kwargs)

        return async_call

    def call(*args: Any, **kwargs: Any) -> Any:
        fault()
        return real(*args, **kwargs)

    return call


#: duty -> (what to break on the started gateway, how many calls show it runs again)
BREAK: dict[str, Callable[[Gateway, list[int]], None]] = {
    "health": lambda g, calls: setattr(g.supervisor.health, "check",
                                       failing_once(calls, g.supervisor.health.check)),
    "client_expiry": lambda g, calls: setattr(g.router, "expire", failing_once(calls, g.router.expire)),
    "feedback": lambda g, calls: setattr(g.listener, "run", failing_once(calls, g.listener.run)),
    "liveness": lambda g, calls: setattr(g.supervisor, "judge", failing_once(calls, g.supervisor.judge)),
    "replica_link": lambda g, calls: setattr(g.replication, "tick", failing_once(calls, g.replication.tick)),
}


@pytest.mark.parametrize("duty", sorted(BREAK))
def test_a_duty_that_raises_is_logged_counted_and_restarted(duty: str, keys: Path,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    real_init = Gateway.__init__

    def init(self: Gateway, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self.duties.restart_after = 0.05
        BREAK[duty](self, calls)

    monkeypatch.setattr(Gateway, "__init__", init)
    with Beating(keys) as beats:
        fake = FakeSGLang(feedback={"v": 1, "port": beats.port, "curve": True})
        with Running(fake) as urls:
            cfg = config(urls, "fair_cache_aware", curve_keys=gateway_keys(keys), health_interval=0.05,
                         client_ttl=0.2, peer=PeerConfig(port=free_port(), interval=0.05, timeout=1.0))

            async def scenario() -> None:
                async with gateway_at(cfg) as (gw, gateway), aiohttp.ClientSession() as s:
                    for _ in range(200):
                        if len(calls) >= 2 and gateway.duties.restarts[duty] == 1:
                            break
                        await asyncio.sleep(0.02)
                    assert len(calls) >= 2, f"{duty} did not run again"
                    assert gateway.duties.view()[duty] == {"restarts": 1, "running": True}
                    metrics = await (await s.get(gw + "/metrics")).text()
                    for series in ("restarts_total", "running"):
                        assert re.search(rf'sglang_fair_gateway_duty_{series}{{duty="{duty}"}} 1\.0', metrics)
                    state = await (await s.get(gw + "/gateway/state")).json()
                    assert state["duties"][duty]["restarts"] == 1
                    others = {d: row for d, row in state["duties"].items() if d != duty}
                    # every duty runs here (and the fairness page's sampler, which survives its own
                    # errors), the others untouched
                    assert set(others) == (set(BREAK) | {"fairness_page"}) - {duty}
                    assert all(row == {"restarts": 0, "running": True} for row in others.values())

            with caplog.at_level(logging.ERROR, logger="sglang_fair.gateway"):
                run(scenario)
    assert f"background duty {duty!r} stopped (RuntimeError: a fault injected by the test)" in caplog.text


def test_a_duty_that_keeps_failing_is_given_up_once() -> None:
    given_up: list[str] = []
    failures = [0]

    async def broken() -> None:
        failures[0] += 1
        raise OSError("no socket")

    async def fine() -> None:
        await asyncio.sleep(3600)

    async def scenario() -> None:
        duties = Duties(restart_after=0.01, give_up_after=3, window=60.0, on_give_up=given_up.append)
        duties.start("broken", broken)
        duties.start("fine", fine)
        await asyncio.sleep(0.3)
        assert failures[0] == 3 and given_up == ["broken"] and duties.restarts["broken"] == 2
        assert duties.view() == {"broken": {"restarts": 2, "running": False},
                                 "fine": {"restarts": 0, "running": True}}
        await duties.stop()

    asyncio.run(scenario())


def test_failures_spread_over_more_than_the_window_are_restarted_forever() -> None:
    """The control of the give-up: the same failures, each outside the window of the others."""
    now = [0.0]
    duties = Duties(give_up_after=3, window=10.0, on_give_up=lambda name: pytest.fail("gave up"),
                    clock=lambda: now[0])
    duties.failures["x"] = deque()
    for _ in range(10):
        now[0] += 11.0
        assert not duties._too_often("x")


def test_the_gateway_exits_non_zero_when_a_duty_keeps_failing(monkeypatch: pytest.MonkeyPatch) -> None:
    async def always_failing(self: ServerSupervisor, probe: Any, interval: float) -> None:
        raise RuntimeError("the health watch cannot run")

    monkeypatch.setattr(ServerSupervisor, "watch_health", always_failing)
    real_build = launch.build_gateway

    def build(*args: Any) -> Gateway:
        gateway = real_build(*args)
        gateway.duties.restart_after = 0.01
        return gateway

    monkeypatch.setattr(launch, "build_gateway", build)
    with Running(FakeSGLang()) as urls:
        assert launch.serve(config(urls)) == EXIT_DUTY_FAILED
