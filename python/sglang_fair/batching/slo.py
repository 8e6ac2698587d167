"""Per-request latency targets: TTFT and TPOT (TBT), from the request or from its client's class
(:meth:`SLOTable.resolve`: a request's own targets where it set them, the class's for the rest).

A token's deadline follows FairBatching's envelope ([3] §3.1): output token ``k`` (0 = the first) of
a request that arrived at ``a`` is due at ``a + TTFT + k * TPOT``. Once the first token is out (at
``t0``), the TPOT target as [3] measures it (the worst running average from the first token) holds
exactly when token ``k`` comes by ``t0 + k * TPOT``, an earlier deadline when the first token was
early: :class:`~sglang_fair.batching.base.DecodeView` offers both.

Classes (``paying=0.5/0.1,free=2/0.5``: name=TTFT/TPOT in seconds) and the client ->
class map (``alice=paying,bob=free``) come from :class:`~sglang_fair.batching.base.BatchingConfig`;
a client without a class gets the default targets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sglang_fair.core.errors import ConfigError, require


@dataclass(frozen=True)
class SLO:
    """Time to first token and time per output token after it, in seconds."""

    ttft: float
    tpot: float

    def __post_init__(self) -> None:
        require(self.ttft > 0 and math.isfinite(self.ttft), f"TTFT target must be > 0, got {self.ttft}")
        require(self.tpot > 0 and math.isfinite(self.tpot), f"TPOT target must be > 0, got {self.tpot}")

    def deadline(self, arrival: float, index: int) -> float:
        """When output token ``index`` (0 = the first) is due ([3]'s envelope)."""
        return arrival + self.ttft + index * self.tpot


def _pairs(text: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ConfigError(f"{what}: expected name=value, got {item!r}")
        require(name.strip() not in out, f"{what}: {name.strip()!r} given twice")
        out[name.strip()] = value.strip()
    return out


def parse_classes(text: str) -> dict[str, SLO]:
    """``paying=0.5/0.1,free=2/0.5`` -> {class: SLO(ttft, tpot)}."""
    classes: dict[str, SLO] = {}
    for name, value in _pairs(text, "--batch-slo-classes").items():
        ttft, sep, tpot = value.partition("/")
        try:
            classes[name] = SLO(float(ttft), float(tpot))
        except ValueError:
            raise ConfigError(f"--batch-slo-classes: {name}={value}: expected TTFT/TPOT in seconds") from None
        require(bool(sep), f"--batch-slo-classes: {name}={value}: expected TTFT/TPOT in seconds")
    return classes


class SLOTable:
    """Targets per client: its class's, or the default."""

    def __init__(self, default: SLO, classes: Mapping[str, SLO], client_class: Mapping[str, str]) -> None:
        for client, cls in client_class.items():
            require(cls in classes, f"client {client!r}: unknown SLO class {cls!r}; known: "
                    f"{', '.join(sorted(classes)) or 'none'} (--batch-slo-classes)")
        self.default = default
        self.classes = dict(classes)
        self.client_class = dict(client_class)

    @classmethod
    def parse(cls, default: SLO, classes: str, client_classes: str) -> SLOTable:
        return cls(default, parse_classes(classes), _pairs(client_classes, "--batch-client-classes"))

    def for_client(self, client: str) -> SLO:
        name = self.client_class.get(client)
        return self.default if name is None else self.classes[name]

    def resolve(self, client: str, targets: Sequence[float | None] | None = None) -> SLO:
        """A request's targets: ``targets`` (its own TTFT, TPOT; None where it set none), the rest
        from its client's class."""
        base = self.for_client(client)
        if not targets:
            return base
        ttft, tpot = targets
        return SLO(base.ttft if ttft is None else ttft, base.tpot if tpot is None else tpot)

    def class_of(self, client: str) -> str:
        return self.client_class.get(client, "default")
