"""The project's serving flags, over the core's configs, validated once, passed to SGLang's processes.

The launcher validates a :class:`FairConfig` from the command line and exports its flag values as
JSON in the environment variable ``SGLANG_FAIR_CONFIG``; every SGLang process (HTTP server,
schedulers) inherits the environment and rebuilds the same config in :func:`config_from_env`.
Without that variable (plain ``python -m sglang.launch_server`` with the plugin enabled) the
defaults apply.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.admission.band_names import parse_bands
from sglang_fair.batching import BatchingConfig
from sglang_fair.core.cost import CostModel, parse_weights
from sglang_fair.core.errors import require
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.edge.config import EdgeConfig, edge_config, merge_per_client
from sglang_fair.links.feedback_hub import FeedbackConfig

ENV_CONFIG = "SGLANG_FAIR_CONFIG"
ENV_STATE_DIR = "SGLANG_FAIR_STATE_DIR"
# added to SGLang's --schedule-policy choices; the rest stay SGLang's
FAIR_POLICIES = ("dlpm", "dlpm_light", "vtc")
# --batch-policy values a SGLang worker runs (docs/design/batching.md: SGLang cannot defer decodes)
BATCHING_POLICIES = ("sglang", "fairbatching")
# BatchingConfig fields that have no meaning in SGLang (SLAI's, and [3]'s arrival envelope choice)
BATCHING_SKIP = ("offset", "offset_high", "memory_threshold", "max_active", "decode_limit", "prefill_order",
                 "envelope")


@dataclass(frozen=True)
class FairConfig:
    """What ``sglang-fair serve`` adds to SGLang's flags, over the core's own configs: Q^u
    (``--fair-quantum``, :class:`AdmissionConfig`), the cost (``--w-e``, ``--w-q``,
    ``--client-weights``, :class:`CostModel`), the HTTP edge shared with the gateway (client identity,
    per-client bounds, the trusted gateway, the clients reading every client: :class:`EdgeConfig`),
    the feedback gateways hear (``--feedback-...``, :class:`FeedbackConfig`),
    and batch formation
    (``--batch-policy fairbatching``: the time-budget chunk sizing of ``chunk_sizer.py``,
    :class:`BatchingConfig`). The admission policy's name is SGLang's ``--schedule-policy``."""

    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    edge: EdgeConfig = field(default_factory=EdgeConfig)
    client_max_queued: int = field(
        default=1024, metadata={"help": "requests one client may have waiting in one scheduler (in the "
                                        "router: in flight, times the workers); more get 429, Retry-After "
                                        "(0: no limit; applies where the edge names clients)"})

    def __post_init__(self) -> None:
        require(self.client_max_queued >= 0,
                f"--client-max-queued must be >= 0, got {self.client_max_queued}")
        require(self.batching.policy in BATCHING_POLICIES,
                f"--batch-policy {self.batching.policy!r}: SGLang workers run "
                f"{' or '.join(BATCHING_POLICIES)} "
                "(SGLang decodes every running request in every decode step; Sarathi's rule is SGLang's "
                "--enable-mixed-chunk with --chunked-prefill-size; see docs/design/batching.md)")
        self.cost()  # a conflict between the flag and the key file is an error at once
        self.bands()

    def admins(self) -> frozenset[str]:
        """The clients whose keys may read every client's figures."""
        return self.edge.admins()

    def cost(self) -> CostModel:
        """The cost model with every client's weight (workers and the router use the same)."""
        weights = self.edge.weights(self.admission.cost.client_weights)
        return dataclasses.replace(self.admission.cost, client_weights=weights)

    def bands(self) -> dict[str, float]:
        """``--fair-client-bands`` with the tenant file's bands (a conflict: error)."""
        return merge_per_client(self.admission.client_bands, self.edge.key_table.bands, "band",
                                 "--fair-client-bands")

    def for_policy(self, policy: str) -> AdmissionConfig:
        """The core's admission config for SGLang policy name ``policy``."""
        return dataclasses.replace(self.admission, policy=policy, cost=self.cost(), client_bands=self.bands())

    def to_env(self) -> str:
        """The flag values as JSON; :func:`config_from_env` rebuilds the same config."""
        flags = {**_values(self.admission, AdmissionConfig.flag_prefix, skip=("policy", "cost")),
                 **_values(self.admission.cost),
                 **_values(self.batching, BatchingConfig.flag_prefix, skip=BATCHING_SKIP),
                 **_values(self.feedback, FeedbackConfig.flag_prefix),
                 **_values(self.edge),
                 **_values(self)}
        return json.dumps(flags)


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of :class:`FairConfig`, derived from the configs that declare them."""
    add_flags(parser, AdmissionConfig, skip=("policy",))
    add_flags(parser, CostModel)
    add_flags(parser, BatchingConfig, skip=BATCHING_SKIP)
    add_flags(parser, FeedbackConfig)
    add_flags(parser, EdgeConfig)
    add_flags(parser, FairConfig)


def _values(config: Any, prefix: str = "", skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {prefix + f.name: getattr(config, f.name) for f in dataclasses.fields(config)
            if f.name not in skip and not dataclasses.is_dataclass(getattr(config, f.name))}


def build_config(values: Mapping[str, Any]) -> FairConfig:
    """Build and validate a config from flag values (loads the key file, if any)."""
    args = argparse.Namespace(**{k: v for k, v in values.items() if v is not None})
    if isinstance(getattr(args, "client_weights", None), str):
        args.client_weights = parse_weights(args.client_weights)
    if isinstance(getattr(args, "fair_client_bands", None), str):
        args.fair_client_bands = parse_bands(args.fair_client_bands)
    admission = from_flags(AdmissionConfig, args, cost=from_flags(CostModel, args))
    return from_flags(FairConfig, args, admission=admission, batching=from_flags(BatchingConfig, args),
                      feedback=from_flags(FeedbackConfig, args), edge=edge_config(args))


def config_from_env(environ: Mapping[str, str] | None = None) -> FairConfig:
    """The config the launcher exported, or the defaults when none was; built once per process (the
    hooks of one process all ask for it, and the key file is read at start)."""
    env = os.environ if environ is None else environ
    return _config_of(env.get(ENV_CONFIG, ""))


@functools.lru_cache(maxsize=4)
def _config_of(raw: str) -> FairConfig:
    return build_config(json.loads(raw)) if raw else FairConfig()
