"""The gateway's background duties, watched: none is ever silently gone.

A duty is a coroutine that runs until the gateway stops (the health watch, the client expiry, the
feedback listener, the liveness check, the replica link). :class:`Duties` runs each in its own task;
one that raises (or returns) is logged with its error and started again after ``restart_after``
seconds, and counted (``sglang_fair_gateway_duty_restarts_total{duty=...}`` in the gateway's
``/metrics``, ``duties`` in ``/gateway/state``). A duty that fails ``give_up_after`` times within
``window`` seconds is not started again: ``on_give_up`` hears its name, and ``sglang-fair gateway``
then stops serving and exits non-zero (``launch.py``), so its supervisor (Docker, Kubernetes,
systemd) restarts the process rather than leave a gateway running without the duty.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

logger = logging.getLogger("sglang_fair.gateway")
Duty = Callable[[], Awaitable[None]]
EXIT_DUTY_FAILED = 3  # the exit status of a gateway that gave up on a duty


def give_up_by_exiting(name: str) -> None:
    """The default :attr:`Duties.on_give_up`: end the process (``SystemExit`` leaves the event loop)."""
    raise SystemExit(EXIT_DUTY_FAILED)


class Duties:
    """The duties started (:meth:`start`), their restarts, and whether each still runs."""

    def __init__(self, restart_after: float = 1.0, give_up_after: int = 5, window: float = 60.0,
                 on_give_up: Callable[[str], None] = give_up_by_exiting,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.restart_after, self.give_up_after, self.window = restart_after, give_up_after, window
        self.on_give_up, self.clock = on_give_up, clock
        self.restarts: dict[str, int] = {}
        self.failures: dict[str, deque[float]] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.given_up: list[str] = []

    def start(self, name: str, duty: Duty) -> None:
        """Run ``duty`` (a fresh call after every failure) in a watched task, in the running loop."""
        self.restarts.setdefault(name, 0)
        self.failures.setdefault(name, deque())
        self.tasks[name] = asyncio.create_task(self._keep(name, duty), name=f"gateway-duty-{name}")

    async def _keep(self, name: str, duty: Duty) -> None:
        while True:
            try:
                await duty()
                why = "it returned"
            except asyncio.CancelledError:
                raise
            except Exception as err:
                why = f"{type(err).__name__}: {err}"
                logger.error("gateway: background duty %r failed", name, exc_info=err)
            if self._too_often(name):
                logger.critical("gateway: background duty %r failed %d times within %.0f s (%s): giving up",
                                name, self.give_up_after, self.window, why)
                self.given_up.append(name)
                self.on_give_up(name)
                return
            self.restarts[name] += 1
            logger.error("gateway: background duty %r stopped (%s): restarting it in %.1f s (restart %d)",
                         name, why, self.restart_after, self.restarts[name])
            await asyncio.sleep(self.restart_after)

    def _too_often(self, name: str) -> bool:
        now, failures = self.clock(), self.failures[name]
        failures.append(now)
        while failures and now - failures[0] > self.window:
            failures.popleft()
        return len(failures) >= self.give_up_after

    async def stop(self) -> None:
        """Cancel every duty and wait for them to end."""
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)

    def view(self) -> dict[str, dict[str, Any]]:
        """Per duty: its restarts and whether it runs now."""
        return {name: {"restarts": self.restarts[name], "running": not task.done()}
                for name, task in self.tasks.items()}


class DutyCollector:
    """A Prometheus collector of :class:`Duties`: restarts per duty, and whether each runs."""

    def __init__(self, duties: Duties) -> None:
        self.duties = duties

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        restarts = CounterMetricFamily("sglang_fair_gateway_duty_restarts",
                                       "times a background duty of the gateway failed and was restarted",
                                       labels=["duty"])
        running = GaugeMetricFamily("sglang_fair_gateway_duty_running",
                                    "1 while a background duty of the gateway runs", labels=["duty"])
        for name, row in self.duties.view().items():
            restarts.add_metric([name], row["restarts"])
            running.add_metric([name], 1.0 if row["running"] else 0.0)
        yield restarts
        yield running
