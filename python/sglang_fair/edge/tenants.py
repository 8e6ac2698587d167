"""The tenant file: who the clients are and what each bought, one TOML file for ``serve`` and the gateway.

    # tenants.toml (given as --client-keys tenants.toml)
    [tenants.premium]
    keys = ["sk-premium-1", "sk-premium-2"]
    weight = 4                        # its share against the others (default 1)
    band = "interactive"              # interactive, standard (default) or batch: strict priority
    requests_per_minute = 600         # 0 or absent: no bound
    tokens_per_minute = 200_000       # input + output tokens
    allow_request_priority = true     # a request's own `priority` sets its band (default false)

    [tenants.free]
    keys = ["sk-free"]
    tokens_per_minute = 20_000

A key belongs to one tenant. Errors name the file and the line (TOML's own, or the tenant's table).
A ``API_KEY CLIENT [WEIGHT]`` key file (``keys.py``) is the same with no budgets.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.admission.band_names import NAMED_BANDS
from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.budgets import Budget

FIELDS = frozenset({"keys", "weight", "band", "requests_per_minute", "tokens_per_minute",
                    "allow_request_priority"})


@dataclass(frozen=True)
class Tenant:
    """One tenant: its name (the client the schedulers and routers count), keys, weight and budget."""

    name: str
    keys: tuple[str, ...]
    weight: float | None = None
    band: int | None = None
    budget: Budget = field(default_factory=Budget)
    allow_request_priority: bool = False  # a request's own SGLang ``priority`` sets its band


def _line_of(lines: list[str], name: str) -> int:
    """The line of ``[tenants.NAME]`` (1-based; 0 if not found, e.g. an inline table)."""
    heads = {f"[tenants.{name}]", f'[tenants."{name}"]', f"[tenants.'{name}']"}
    for number, line in enumerate(lines, start=1):
        if line.split("#", 1)[0].strip().replace(" ", "") in heads:
            return number
    return 0


def _count(where: str, table: dict[str, Any], key: str) -> int:
    value = table.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: {key} must be a whole number >= 0, got {value!r}")
    return value


def _tenant(where: str, name: str, table: Any) -> Tenant:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: tenant {name!r} must be a table ([tenants.{name}])")
    unknown = sorted(set(table) - FIELDS)
    if unknown:
        raise ConfigError(f"{where}: tenant {name!r}: unknown field(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(FIELDS))})")
    keys = table.get("keys")
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k.strip() for k in keys):
        raise ConfigError(f"{where}: tenant {name!r}: keys must be a non-empty list of strings")
    weight = table.get("weight")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int | float)
                               or not weight > 0):
        raise ConfigError(f"{where}: tenant {name!r}: weight must be a number > 0, got {weight!r}")
    band = table.get("band")
    if band is not None and band not in NAMED_BANDS:
        raise ConfigError(f"{where}: tenant {name!r}: band must be one of {', '.join(NAMED_BANDS)}, "
                          f"got {band!r}")
    budget = Budget(_count(where, table, "requests_per_minute"), _count(where, table, "tokens_per_minute"))
    allow = table.get("allow_request_priority", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"{where}: tenant {name!r}: allow_request_priority must be true or false, "
                          f"got {allow!r}")
    return Tenant(name, tuple(keys), None if weight is None else float(weight),
                  None if band is None else NAMED_BANDS[band], budget, allow)


def parse_tenants(lines: list[str], name: str = "<tenants>") -> list[Tenant]:
    """Parse a tenant file's lines (see the module docstring)."""
    try:
        doc = tomllib.loads("\n".join(lines))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{name}: not valid TOML: {err}") from None
    extra = sorted(set(doc) - {"tenants"})
    if extra or not isinstance(doc.get("tenants"), dict) or not doc["tenants"]:
        raise ConfigError(f"{name}: expected [tenants.NAME] tables and nothing else"
                          + (f" (found {', '.join(extra)})" if extra else ""))
    tenants: list[Tenant] = []
    owner: dict[str, str] = {}
    for tenant_name, table in doc["tenants"].items():
        where = f"{name}:{_line_of(lines, tenant_name)}"
        tenant = _tenant(where, tenant_name, table)
        for key in tenant.keys:
            if key in owner:
                raise ConfigError(f"{where}: tenant {tenant_name!r}: a key is already "
                                  f"tenant {owner[key]!r}'s")
            owner[key] = tenant_name
        tenants.append(tenant)
    return tenants
