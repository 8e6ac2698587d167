"""The router's tenant file (``--router-client-keys``): its weights, at start and reloaded while routing.

The file is the one ``serve`` and the gateway read (``sglang_fair.edge.tenants``, one parser); the
router uses only its weights, merged with ``--client-weights`` as every scheduler merges them
(:func:`~sglang_fair.edge.config.merge_weights`: a tenant given two weights is refused). At start an
invalid file is an error. While routing, :class:`~sglang_fair.edge.reload.TenantReloader` looks at it
at every liveness check of the service loop (every half second, one ``stat``) and at once after
SIGHUP: a changed weight reaches the routing policy's cost model (its next refill uses it, what the
counters hold stays); an invalid file, or a weight against ``--client-weights``, is refused with a log
line naming the file and line, and the weights in force stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sglang_fair.core.cost import CostModel
from sglang_fair.edge.config import merge_weights
from sglang_fair.edge.keys import KeyTable, load_key_file
from sglang_fair.edge.reload import PARTS, TenantReloader
from sglang_fair.routing import RoutingPolicy

ROUTER_LIVE = frozenset(PARTS)  # the router reads only the weights: every other part is not its own


def start_cost(cost: CostModel, path: str) -> tuple[CostModel, KeyTable]:
    """``cost`` with the weights of the tenant file ``path`` merged in, and the file's table (an
    invalid file or a conflict with ``--client-weights``: :class:`ConfigError`)."""
    table = load_key_file(path)
    return replace(cost, client_weights=merge_weights(cost.client_weights, table)), table


def weights_reloader(path: str, table: KeyTable, flag_weights: Mapping[str, float],
                     policy: RoutingPolicy) -> TenantReloader:
    """A reloader of ``path`` (running with ``table``) that gives ``policy`` the file's weights merged
    with ``flag_weights`` (``--client-weights``); the service loop polls it."""

    def apply(new: KeyTable) -> None:
        policy.set_client_weights(merge_weights(flag_weights, new))

    return TenantReloader(path, table, apply, ROUTER_LIVE, "router", poll_s=0.0)
