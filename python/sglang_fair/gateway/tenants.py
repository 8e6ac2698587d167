"""The gateway's reload of the tenant file (``edge/reload.py``), on SIGHUP and when the file changes.

Everything the gateway reads of the file changes live: the keys (the intake and the pages read
:attr:`GatewayTenants.live` per request), the budgets (the router's :class:`~sglang_fair.edge.budgets.
BudgetBook`, what was used in the last minute kept) and the weights (the routing policy's cost model:
its next refill uses them). Bands are the servers' (each worker's admission); the gateway keeps no
bands, so a change of them is taken as it is. The servers behind the gateway read their own
``--client-keys`` and reload it themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time

from sglang_fair.edge.config import EdgeConfig, merge_weights
from sglang_fair.edge.keys import KeyTable
from sglang_fair.edge.reload import PARTS, LiveTenants, TenantReloader
from sglang_fair.gateway.routing import GatewayRouter

GATEWAY_LIVE = frozenset(PARTS)


class GatewayTenants:
    """The gateway's tenant table in force and its reloader (None without a key file)."""

    def __init__(self, edge: EdgeConfig, router: GatewayRouter, flag_weights: dict[str, float]) -> None:
        self.live = LiveTenants(edge.key_table)
        self.router, self.edge, self.flag_weights = router, edge, flag_weights
        self.reloader = (TenantReloader(edge.client_keys, edge.key_table, self.apply, GATEWAY_LIVE, "gateway")
                         if edge.client_keys else None)
        self.wake: asyncio.Event | None = None

    def apply(self, table: KeyTable) -> None:
        """Run with ``table`` (a weight that conflicts with ``--client-weights``: ``ConfigError``)."""
        self.router.policy.set_client_weights(merge_weights(self.flag_weights, table))
        self.router.budgets.set_budgets(table.budgets)
        self.live.table = table

    def sighup(self) -> None:
        """Reload at once (the SIGHUP handler)."""
        if self.reloader is not None:
            self.reloader.request()
            if self.wake is not None:
                self.wake.set()

    async def run(self) -> None:
        """The ``tenants`` duty: poll the file every ``poll_s`` seconds, at once on SIGHUP (the
        handler is installed when the gateway runs in the main thread)."""
        if self.reloader is None:
            await asyncio.Event().wait()  # nothing to reload: idle until stopped
            return
        self.wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            loop.add_signal_handler(signal.SIGHUP, self.sighup)
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), self.reloader.poll_s)
                self.wake.clear()
                self.reloader.poll(time.monotonic())
        finally:
            if threading.current_thread() is threading.main_thread():
                loop.remove_signal_handler(signal.SIGHUP)
