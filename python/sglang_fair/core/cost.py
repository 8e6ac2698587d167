"""The service cost of the papers: cost = w_e * extend tokens + w_q * output tokens.

Extend tokens are input tokens not served from the prefix cache ([1] §3); the VTC paper ([2] §3.1)
uses the same linear form over all input tokens. Per-client weights give weighted fair sharing: a
client of weight 2 is entitled to twice the service of a client of weight 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from sglang_fair.core.errors import ConfigError, require


@dataclass(frozen=True)
class CostModel:
    """Weights of the service cost and the per-client fair-share weights (default 1)."""

    w_e: float = field(default=1.0, metadata={"help": "cost weight w_e of an extend (uncached input) token"})
    w_q: float = field(default=2.0, metadata={"help": "cost weight w_q of an output token"})
    client_weights: Mapping[str, float] = field(default_factory=dict, metadata={
        "help": "per-client fair-share weights, 'alice=2,bob=1' or a JSON object"})

    def __post_init__(self) -> None:
        require(self.w_e >= 0, f"w_e must be >= 0, got {self.w_e}")
        require(self.w_q >= 0, f"w_q must be >= 0, got {self.w_q}")
        require(self.w_e > 0 or self.w_q > 0, "w_e and w_q cannot both be 0")
        for client, weight in self.client_weights.items():
            require(weight > 0, f"weight of client {client!r} must be > 0, got {weight}")
        object.__setattr__(self, "client_weights", dict(self.client_weights))  # a private copy

    def extend_cost(self, extend_tokens: int) -> float:
        """Cost of prefilling ``extend_tokens`` uncached input tokens."""
        if extend_tokens < 0:  # not require(): its message would be formatted at every call (a hot path)
            raise ConfigError(f"extend tokens must be >= 0, got {extend_tokens}")
        return self.w_e * extend_tokens

    def output_cost(self, output_tokens: int) -> float:
        """Cost of producing ``output_tokens`` output tokens."""
        if output_tokens < 0:  # as in extend_cost
            raise ConfigError(f"output tokens must be >= 0, got {output_tokens}")
        return self.w_q * output_tokens

    def cost(self, extend_tokens: int, output_tokens: int) -> float:
        return self.extend_cost(extend_tokens) + self.output_cost(output_tokens)

    def weight(self, client: str) -> float:
        """Fair-share weight of ``client`` (1 unless configured)."""
        return self.client_weights.get(client, 1.0)


def parse_weights(text: str) -> dict[str, float]:
    """Parse ``'a=2,b=1.5'``, or the JSON object :func:`format_weights` writes (client names may
    hold commas), into ``{'a': 2.0, 'b': 1.5}``; errors name the bad item."""
    if text.strip().startswith("{"):
        try:
            pairs = [(str(k), v) for k, v in json.loads(text).items()]
        except (ValueError, AttributeError) as err:
            raise ConfigError(f"--client-weights: not a JSON object of weights: {err}") from None
    else:
        pairs = []
        for item in (x.strip() for x in text.split(",") if x.strip()):
            name, sep, value = item.partition("=")
            require(bool(sep and name.strip()), f"--client-weights: expected CLIENT=WEIGHT, got {item!r}")
            pairs.append((name.strip(), value))
    weights: dict[str, float] = {}
    for name, value in pairs:
        try:
            weight = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"--client-weights: weight of {name!r} is not a number: {value!r}") from None
        require(weight > 0, f"--client-weights: weight of {name!r} must be > 0, got {weight}")
        weights[name] = weight
    return weights


def format_weights(weights: Mapping[str, float]) -> str:
    """``weights`` as :func:`parse_weights` reads them back (a JSON object)."""
    return json.dumps(dict(weights), sort_keys=True)
