"""The priority bands' names and numbers, and the ``--fair-client-bands`` parser (``bands.py`` uses them)."""

from __future__ import annotations

import json
import sys

from sglang_fair.core.errors import ConfigError

DEFAULT_BAND = 1  # a client without a band: after band 0 (interactive), before 2 (batch)
MAX_BAND = 9
NAMED_BANDS = {"interactive": 0, "standard": DEFAULT_BAND, "batch": 2}


def request_band(priority: object, low_values_first: bool = False) -> int | None:
    """The band of a request's own SGLang ``priority`` (read only for tenants that allow it): 0 is
    ``standard`` (band 1); each step more urgent in SGLang's order (larger values unless
    ``--schedule-low-priority-values-first``) is one band earlier, each step less urgent one band later,
    within [0, :data:`MAX_BAND`]. None: no priority given (SGLang's fill-in, +-``sys.maxsize``, too)."""
    if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) >= sys.maxsize:
        return None
    urgency = -priority if low_values_first else priority
    return min(max(DEFAULT_BAND - urgency, 0), MAX_BAND)


def parse_bands(text: str) -> dict[str, float]:
    """``'alice=interactive,etl=2'`` (names or numbers), or a JSON object, into client -> band."""
    try:
        pairs = list(json.loads(text).items()) if text.strip().startswith("{") else [
            tuple(item.split("=", 1)) for item in (x.strip() for x in text.split(",")) if item]
    except (ValueError, AttributeError) as err:
        raise ConfigError(f"--fair-client-bands: not a JSON object: {err}") from None
    bands: dict[str, float] = {}
    for pair in pairs:
        if len(pair) != 2 or not str(pair[0]).strip():
            raise ConfigError(f"--fair-client-bands: expected CLIENT=BAND, got {'='.join(map(str, pair))!r}")
        name, value = str(pair[0]).strip(), pair[1]
        band = NAMED_BANDS.get(str(value).strip())
        try:
            bands[name] = float(value) if band is None else float(band)
        except (TypeError, ValueError):
            raise ConfigError(f"--fair-client-bands: band of {name!r} is not one of "
                              f"{', '.join(NAMED_BANDS)} or a number in [0, {MAX_BAND}]: {value!r}") from None
    return bands
