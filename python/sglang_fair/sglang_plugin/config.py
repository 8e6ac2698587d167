"""The project's serving flags: one frozen dataclass, validated once, passed to SGLang's processes.

The launcher validates a :class:`FairConfig` from the command line and exports it as JSON in the
environment variable ``SGLANG_FAIR_CONFIG``; every SGLang process (HTTP server, schedulers) inherits
the environment and rebuilds the same config in :func:`config_from_env`. Without that variable (plain
``python -m sglang.launch_server`` with the plugin enabled) the defaults apply.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.core.cost import CostModel, parse_weights
from sglang_fair.core.errors import ConfigError, require
from sglang_fair.sglang_plugin.keys import KeyTable, load_key_file

ENV_CONFIG = "SGLANG_FAIR_CONFIG"
ENV_STATE_DIR = "SGLANG_FAIR_STATE_DIR"
FAIR_POLICIES = ("dlpm", "vtc")  # added to SGLang's --schedule-policy choices; the rest stay SGLang's


@dataclass(frozen=True)
class FairConfig:
    """Flags of ``sglang-fair serve`` (each field is one ``--fair-...`` or ``--client-...`` flag)."""

    fair_quantum: float = field(default=4096.0, metadata={"help": "DLPM quantum Q^u (service per refill)"})
    fair_w_e: float = field(default=1.0, metadata={"help": "cost weight w_e of an extend (uncached) token"})
    fair_w_q: float = field(default=2.0, metadata={"help": "cost weight w_q of an output token"})
    client_weights: str = field(
        default="", metadata={"help": "per-client fair-share weights, e.g. 'alice=2,bob=1'"}
    )
    client_keys: str = field(
        default="", metadata={"help": "file of 'API_KEY CLIENT [WEIGHT]' lines; enables 401 for other keys"}
    )
    client_header: str = field(default="X-Client-Id", metadata={"help": "HTTP header naming the client"})
    key_table: KeyTable = field(default_factory=KeyTable, metadata={"flag": False})

    def __post_init__(self) -> None:
        require(self.fair_quantum > 0, f"--fair-quantum (Q^u) must be > 0, got {self.fair_quantum}")
        require(bool(self.client_header.strip()), "--client-header must not be empty")
        self.admission("dlpm")  # validates w_e, w_q and the weights once

    def weights(self) -> dict[str, float]:
        """Per-client weights from ``client_weights`` and the key file (a conflict is an error)."""
        weights = parse_weights(self.client_weights)
        for client, weight in self.key_table.weights.items():
            if client in weights and weights[client] != weight:
                raise ConfigError(
                    f"client {client!r}: weight {weights[client]} in --client-weights conflicts with "
                    f"weight {weight} in --client-keys"
                )
            weights[client] = weight
        return weights

    def admission(self, policy: str) -> AdmissionConfig:
        """The core's admission config for SGLang policy name ``policy``."""
        cost = CostModel(w_e=self.fair_w_e, w_q=self.fair_w_q, client_weights=self.weights())
        return AdmissionConfig(policy=policy, quantum=self.fair_quantum, cost=cost)

    def to_env(self) -> str:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "key_table"}
        return json.dumps(data)


def build_config(values: Mapping[str, Any]) -> FairConfig:
    """Build and validate a config from flag values (loads the key file, if any)."""
    known = {f.name for f in dataclasses.fields(FairConfig)} - {"key_table"}
    kwargs = {k: v for k, v in values.items() if k in known and v is not None}
    path = str(kwargs.get("client_keys") or "")
    table = load_key_file(path) if path else KeyTable()
    return FairConfig(key_table=table, **kwargs)


def config_from_env(environ: Mapping[str, str] | None = None) -> FairConfig:
    """The config the launcher exported, or the defaults when none was."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_CONFIG)
    if not raw:
        return FairConfig()
    return build_config(json.loads(raw))
