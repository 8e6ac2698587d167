"""API keys that identify clients: a file of ``API_KEY CLIENT [WEIGHT]`` lines, or a tenant file.

Blank lines and lines starting with ``#`` are ignored. A key may appear once; a client may have
several keys, but they must agree on its weight. Errors name the file and the line. A file whose name
ends in ``.toml`` is a tenant file (``tenants.py``: keys, weight and budgets per tenant); a key file is
a tenant file with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.budgets import Budget
from sglang_fair.edge.tenants import Tenant, parse_tenants


@dataclass(frozen=True)
class KeyTable:
    """Key -> client, client -> weight (clients without a weight get none here), client -> budget,
    client -> priority band and the clients whose requests' own ``priority`` sets their band (only a
    tenant file sets budgets, bands and that)."""

    clients: dict[str, str] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    budgets: dict[str, Budget] = field(default_factory=dict)
    bands: dict[str, int] = field(default_factory=dict)
    request_priority: frozenset[str] = frozenset()

    @property
    def enabled(self) -> bool:
        return bool(self.clients)


def _parse_line(where: str, parts: list[str]) -> tuple[str, str, float | None]:
    if len(parts) not in (2, 3):
        raise ConfigError(f"{where}: expected 'API_KEY CLIENT [WEIGHT]', got {len(parts)} fields")
    weight: float | None = None
    if len(parts) == 3:
        try:
            weight = float(parts[2])
        except ValueError:
            raise ConfigError(f"{where}: weight {parts[2]!r} is not a number") from None
        if not weight > 0:
            raise ConfigError(f"{where}: weight must be > 0, got {parts[2]}")
    return parts[0], parts[1], weight


def parse_key_lines(lines: list[str], name: str = "<keys>") -> KeyTable:
    """Parse key-file lines (see the module docstring)."""
    clients: dict[str, str] = {}
    weights: dict[str, float] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{name}:{number}"
        key, client, weight = _parse_line(where, text.split())
        if key in clients:
            raise ConfigError(f"{where}: key for {client!r} already used on an earlier line")
        clients[key] = client
        if weight is not None:
            if client in weights and weights[client] != weight:
                raise ConfigError(f"{where}: client {client!r} already has weight {weights[client]}")
            weights[client] = weight
    if not clients:
        raise ConfigError(f"{name}: no keys (expected 'API_KEY CLIENT [WEIGHT]' lines)")
    return KeyTable(clients, weights)


def read_lines(path: str, flag: str) -> list[str]:
    """The lines of the text file ``path`` that ``flag`` names (a :class:`ConfigError` if unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{flag} {path}: cannot read: {err}") from None


def load_key_file(path: str) -> KeyTable:
    """Read and parse a key file, or a tenant file (``*.toml``); unreadable files raise
    :class:`ConfigError`."""
    lines = read_lines(path, "--client-keys")
    return table_of(parse_tenants(lines, path)) if path.endswith(".toml") else parse_key_lines(lines, path)


def table_of(tenants: list[Tenant]) -> KeyTable:
    """The key table of a tenant file's tenants."""
    clients = {key: t.name for t in tenants for key in t.keys}
    weights = {t.name: t.weight for t in tenants if t.weight is not None}
    return KeyTable(clients, weights, {t.name: t.budget for t in tenants if t.budget.bounded},
                    {t.name: t.band for t in tenants if t.band is not None},
                    frozenset(t.name for t in tenants if t.allow_request_priority))
