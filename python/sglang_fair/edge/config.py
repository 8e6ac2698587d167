"""The edge's flags, declared once for ``sglang-fair serve`` and ``sglang-fair gateway``.

:class:`EdgeConfig` holds who the clients are (``--client-keys``, ``--client-header``), how long an
idle one is remembered (``--client-ttl``), what one may hold (``--client-max-inflight``), the body
limit, the trusted gateway's token, the clients that read every client's figures
(``--fairness-admins``) and the model-name check. Both commands embed it (``FairConfig.edge``,
``GatewayConfig.edge``), build it with :func:`edge_config` and merge the key file's client weights
with ``--client-weights`` through :func:`merge_weights` (:meth:`EdgeConfig.weights`), so one key file
serves both, and the router and every scheduler of ``serve`` merge a reloaded file the same way.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field

from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.flags import from_flags
from sglang_fair.edge.admins import parse_admins
from sglang_fair.edge.keys import KeyTable, load_key_file
from sglang_fair.edge.trust import GatewayToken, load_token_file


@dataclass(frozen=True)
class EdgeConfig:
    """The HTTP edge of a server or gateway: identity, per-client bounds, body limit, trust, names."""

    client_keys: str = field(default="", metadata={
        "help": "file of 'API_KEY CLIENT [WEIGHT]' lines, or a tenant file (*.toml: keys, weight and "
                "budgets per tenant, docs/guides/tenants.md); serve and the gateway read the same file; "
                "enables 401 for other keys"})
    client_header: str = field(default="X-Client-Id", metadata={
        "help": "HTTP header naming the client without keys (a gateway names the client to its servers "
                "in it)"})
    client_ttl: float = field(default=600.0, metadata={
        "help": "seconds an idle client's state (its counters) is kept when no --client-keys are given "
                "(it then returns as a new client; 0: forever)"})
    client_max_inflight: int = field(default=0, metadata={
        "help": "requests one client may have in flight; more get 429 with Retry-After (0: no limit)"})
    max_body_bytes: int = field(default=16 << 20, metadata={
        "help": "largest HTTP request body; larger ones get 413 before they are read (0: no limit)"})
    gateway_token_file: str = field(default="", metadata={
        "help": "file whose first line is the token servers share with their gateway: the gateway sends "
                "it with every request; a server lets only requests carrying it pin a data-parallel rank "
                "(routed_dp_rank) or name their client by header despite --client-keys (others pinning a "
                "rank get 403)"})
    fairness_admins: str = field(default="", metadata={
        "help": "comma-separated clients of --client-keys whose keys read every client at /fairness, "
                "/fairness/ui and /metrics (other keys: their own row)"})
    accept_any_model: bool = field(default=False, metadata={
        "help": "serve a request whatever its `model` names, as SGLang does (by default a name other "
                "than the served model name, the model path or `default` gets 404, as from OpenAI)"})
    metrics_top_tenants: int = field(default=20, metadata={
        "help": "tenants with their own label in the per-tenant Prometheus series "
                "(sglang_fair_tenant_*): the K with the most service; the others are summed under "
                "tenant=\"__other__\""})
    key_table: KeyTable = field(default_factory=KeyTable)
    gateway_token: GatewayToken = field(default_factory=GatewayToken)

    def __post_init__(self) -> None:
        require(bool(self.client_header.strip()), "--client-header must not be empty")
        require(self.client_ttl >= 0, f"--client-ttl must be >= 0, got {self.client_ttl}")
        require(self.client_max_inflight >= 0,
                f"--client-max-inflight must be >= 0, got {self.client_max_inflight}")
        require(self.max_body_bytes >= 0, f"--max-body-bytes must be >= 0, got {self.max_body_bytes}")
        require(self.metrics_top_tenants >= 1,
                f"--metrics-top-tenants must be >= 1, got {self.metrics_top_tenants}")
        admins = self.admins()
        require(not admins or self.key_table.enabled, "--fairness-admins needs --client-keys")
        unknown = sorted(admins - set(self.key_table.clients.values()))
        require(not unknown or not self.key_table.enabled,
                f"--fairness-admins names clients without a key in --client-keys: {', '.join(unknown)}")

    def admins(self) -> frozenset[str]:
        """The clients whose keys may read every client's figures (``--fairness-admins``)."""
        return parse_admins(self.fairness_admins)

    def idle_ttl(self) -> float:
        """The client TTL that applies: none with keys (the key file bounds the clients)."""
        return 0.0 if self.key_table.enabled else self.client_ttl

    def weights(self, flag_weights: Mapping[str, float]) -> dict[str, float]:
        """``--client-weights`` (``flag_weights``) with the key file's weights (a conflict: error)."""
        return merge_weights(flag_weights, self.key_table)


def merge_per_client(flag_values: Mapping[str, float], file_values: Mapping[str, float], what: str,
                     flag: str) -> dict[str, float]:
    """``flag_values`` with the key file's ``file_values`` (a client given two values: error)."""
    merged = dict(flag_values)
    for client, value in file_values.items():
        if merged.get(client, value) != value:
            raise ConfigError(f"client {client!r}: {what} {merged[client]} in {flag} "
                              f"conflicts with {what} {value} in --client-keys")
        merged[client] = value
    return merged


def merge_weights(flag_weights: Mapping[str, float], table: KeyTable) -> dict[str, float]:
    """``--client-weights`` with tenant file ``table``'s weights (a tenant given two: error), as
    ``serve``'s schedulers, its router and the gateway all take them, at start and on a reload."""
    return merge_per_client(flag_weights, table.weights, "weight", "--client-weights")


def edge_config(args: argparse.Namespace) -> EdgeConfig:
    """Build and validate the edge's config from parsed flags (reads the key and token files)."""
    keys = str(getattr(args, "client_keys", "") or "")
    token = str(getattr(args, "gateway_token_file", "") or "")
    return from_flags(EdgeConfig, args, key_table=load_key_file(keys) if keys else KeyTable(),
                      gateway_token=load_token_file(token) if token else GatewayToken())
