"""``serve``'s reload of the tenant file (``edge/reload.py``): what each of its processes changes live.

- The HTTP process (:func:`start_edge_reload`, a daemon thread, at once on SIGHUP to ``serve``'s main
  process): the keys (who may send, as which tenant) and the budgets, at the next request.
- Every scheduler (:func:`scheduler_reloader`; several under ``--dp-size``): each looks at the file
  itself (one ``stat``) at every scheduling step that has requests waiting, so the weights (the next
  refill uses them), the bands and ``allow_request_priority`` (``dlpm``, ``dlpm_light``: requests that
  arrive from then on) are the file's before any admission that follows a change; an idle scheduler has
  nothing to admit and looks at its next request.
- The global router (``--dp-size N`` with this project's routing): given the file
  (:func:`router_tenant_file`), it looks at it itself every half second and applies the weights to its
  routing policy (``sglang_fair_router/tenants.py``), with the same merge with ``--client-weights``.

What needs a restart is kept, with a log line: the weights under a policy that is not fair (weights
need ``dlpm``, ``dlpm_light`` or ``vtc``; the router is then not given the file and keeps its start
weights too), the bands under a policy that keeps none. The edge and the schedulers decide the same
way (:func:`live_parts`, :func:`checked`), so the schedulers never apply what the edge refused; the
router refuses what its merge refuses (an invalid file, a weight against ``--client-weights``), not a
band against ``--fair-client-bands``, which it never reads.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from sglang_fair.admission import AdmissionPolicy, keeps_bands
from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.budgets import BudgetBook
from sglang_fair.edge.config import merge_per_client, merge_weights
from sglang_fair.edge.keys import KeyTable
from sglang_fair.edge.reload import LiveTenants, TenantReloader, watch
from sglang_fair.sglang_plugin.config import FAIR_POLICIES, FairConfig

logger = logging.getLogger("sglang_fair")


def live_parts(policy: str | None) -> frozenset[str]:
    """The parts of the tenant file ``serve`` changes while serving with SGLang policy ``policy`` (the
    global router, where one runs, changes the weights with the schedulers)."""
    parts = {"clients", "budgets"}
    if policy in FAIR_POLICIES:
        parts.add("weights")
    if policy is not None and keeps_bands(policy):
        parts |= {"bands", "request_priority"}
    return frozenset(parts)


def checked(config: FairConfig, table: KeyTable, policy: str | None) -> tuple[dict[str, float],
                                                                            dict[str, float]]:
    """The weights and bands ``table`` gives with the flags' (a conflict, or token budgets without a
    fair policy: :class:`ConfigError`)."""
    weights = merge_weights(config.admission.cost.client_weights, table)
    bands = merge_per_client(config.admission.client_bands, table.bands, "band", "--fair-client-bands")
    if policy not in FAIR_POLICIES and any(b.tokens_per_minute for b in table.budgets.values()):
        raise ConfigError(f"tokens_per_minute budgets need --schedule-policy dlpm, dlpm_light or vtc "
                          f"(got {policy})")
    return weights, bands


def allow_request_priority(state: Any, clients: frozenset[str]) -> None:
    """Let ``clients``' requests carry their own band (their SGLang ``priority``) in ``state``'s policy
    (a policy without bands: never; ``launcher.check_combination`` refuses it at start)."""
    clock = getattr(state.policy, "bands", None)
    if clock is None:
        return
    state.priority_clients = clients
    clock.per_request = bool(clients)


def start_edge_reload(config: FairConfig, tenants: LiveTenants, book: BudgetBook,
                      policy: str | None) -> TenantReloader | None:
    """Watch ``--client-keys`` in the HTTP process: a reload replaces ``tenants``' table and ``book``'s
    budgets (None without a key file)."""
    path = config.edge.client_keys
    if not path:
        return None

    def apply(table: KeyTable) -> None:
        checked(config, table, policy)
        tenants.table = table
        book.set_budgets(table.budgets)

    reloader = TenantReloader(path, tenants.table, apply, live_parts(policy), "serve")
    watch(reloader)
    return reloader


def scheduler_reloader(config: FairConfig, policy_name: str, policy: AdmissionPolicy,
                       state: Any) -> TenantReloader | None:
    """A reloader that applies the file's weights and bands to one scheduler's ``policy`` (and to the
    ``state`` that publishes them); the caller polls it. None without a key file."""
    path = config.edge.client_keys
    if not path:
        return None

    def apply(table: KeyTable) -> None:
        weights, bands = checked(config, table, policy_name)
        cost = dataclasses.replace(policy.cost, client_weights=weights)
        policy.cost = cost
        for holder in (state, getattr(state, "ledger", None)):
            if holder is not None and hasattr(holder, "cost"):
                holder.cost = cost
        clock = getattr(policy, "bands", None)
        if clock is not None:
            clock.client_bands = {c: int(b) for c, b in bands.items()}
        allow_request_priority(state, table.request_priority)

    return TenantReloader(path, config.edge.key_table, apply, live_parts(policy_name), "scheduler",
                          poll_s=0.0)


def router_tenant_file(config: FairConfig, policy: str | None) -> str:
    """The tenant file ``serve``'s global router reloads its weights from: ``--client-keys`` where the
    weights change live (:func:`live_parts`), else none (the router keeps its start weights, as the
    schedulers do)."""
    path = config.edge.client_keys
    return os.path.abspath(path) if path and "weights" in live_parts(policy) else ""
