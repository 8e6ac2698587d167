"""Every timer on the serving path behaves the same whatever ``time.monotonic()`` read at start.

``time.monotonic()`` counts from boot: near 0 on a freshly booted machine (a new GPU node, a CI runner),
days on a long-running one. Each component that keeps time (the router's liveness, reconciliation and
client expiry; the scheduler's client expiry; the snapshot publisher's throttle; the PAB report's
throttle) is driven through the same scripted events on clocks that start at 0 s, 60 s and 10^6 s, and
must take the same decisions. The control: the publisher as it was before it was fixed for a fresh boot
(its throttle measured from a zero start) takes different ones, and the same check catches it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from plugin_support import FakeReq

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair.sglang_plugin.pab_report import BudgetReporter
from sglang_fair.sglang_plugin.publish import Publisher
from sglang_fair.sglang_plugin.state import FairState
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.state import RouterState

pytestmark = pytest.mark.timers

ORIGINS = (0.0, 60.0, 1e6)  # right after boot, a minute after, eleven days after


class Clock:
    def __init__(self, origin: float) -> None:
        self.origin, self.t = origin, 0.0

    def __call__(self) -> float:
        return self.origin + self.t


def decisions(scenario: Callable[[Clock], Any]) -> list[Any]:
    """What ``scenario`` decided on each clock origin."""
    return [scenario(Clock(origin)) for origin in ORIGINS]


def assert_origin_free(scenario: Callable[[Clock], Any]) -> None:
    first, *rest = decisions(scenario)
    assert all(d == first for d in rest), dict(zip(ORIGINS, [first, *rest], strict=True))


def router_scenario(clock: Clock) -> list[Any]:
    """Dispatch, heartbeats, a lost finish, a silent worker, an idle client: what the router did."""
    config = RouterConfig("d2lpm", num_workers=2, quantum=100)
    s = RouterState(make_routing_policy(config), heartbeat_timeout=2.0, stall_timeout=5.0, client_ttl=3.0)
    log: list[Any] = []

    def at(t: float) -> float:
        clock.t = t
        return clock()

    for i in range(4):
        log.append(s.submit(fm.Submit(f"r{i}", f"c{i % 2}", pack_tokens([i] * 8)), at(0.1 * i)))
    for t in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        s.feedback(wm.Heartbeat(0, int(t * 2), inflight=1, loops=int(t * 10)), at(t))
        log.append(s.check_liveness(at(t)))
    s.feedback(wm.Finished(0, "r0", 4), at(3.1))
    log.append((sorted(s.inflight), dict(s.counts), s.expire(at(9.0)), s.policy.alive))
    return log


def fair_state_scenario(clock: Clock) -> list[Any]:
    """Clients served at different times, then expiry checks: who was forgotten when."""
    policy = make_admission_policy(AdmissionConfig(policy="dlpm", quantum=100.0))
    state = FairState(policy, client_ttl=5.0, clock=clock)
    log: list[Any] = []
    for t, client in ((0.0, "a"), (2.0, "b"), (4.0, "c")):
        clock.t = t
        req = FakeReq(f"{client}0", client, list(range(10)))
        state.arrive(req)
        state.select([req], SlotBudget(1))
        req.done = True
        state.after_step()
    for t in (4.0, 5.5, 7.5, 9.5, 20.0):
        clock.t = t
        log.append(state.expire())
    return log


def publisher_scenario(tmp_path: Path, publisher: type[Publisher] = Publisher) -> Callable[[Clock], Any]:
    def run(clock: Clock) -> list[int]:
        path = tmp_path / f"scheduler-{clock.origin:g}.json"
        pub = publisher(path, "dlpm", interval=0.1, clock=clock)
        written = []
        for version, t in enumerate((0.0, 0.02, 0.05, 0.13, 0.15, 0.3), 1):
            clock.t = t
            pub.maybe_write(version, idle=False, snapshot=lambda: {})
            written.append(pub._last_version)
        return written
    return run


class ReporterStub(BudgetReporter):
    def report(self, scheduler: Any) -> int:
        return 1


def reporter_scenario(clock: Clock) -> list[int | None]:
    reporter = ReporterStub(budget=None, own=False, every=0.5, clock=clock)  # type: ignore[arg-type]
    out = []
    for t in (0.0, 0.2, 0.6, 0.9, 1.2):
        clock.t = t
        out.append(reporter.after_step(None, None))
    return out


def test_router_state_is_clock_origin_free() -> None:
    assert_origin_free(router_scenario)


def test_scheduler_client_expiry_is_clock_origin_free() -> None:
    assert_origin_free(fair_state_scenario)


def test_snapshot_publisher_is_clock_origin_free(tmp_path: Path) -> None:
    assert_origin_free(publisher_scenario(tmp_path))


def test_pab_report_throttle_is_clock_origin_free() -> None:
    assert_origin_free(reporter_scenario)


class PublisherBeforeTheFix(Publisher):
    """publish.py before a7a6871: the throttle measured from ``_last_time = 0.0``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_time = 0.0


def test_the_check_catches_the_publisher_before_its_fresh_boot_fix(tmp_path: Path) -> None:
    at_boot, *later = decisions(publisher_scenario(tmp_path, PublisherBeforeTheFix))
    assert at_boot[0] == -1 and all(d[0] == 1 for d in later)  # nothing written at first after boot
