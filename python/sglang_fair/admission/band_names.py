"""The priority bands' names and numbers, and the ``--fair-client-bands`` parser (``bands.py`` uses them)."""

from __future__ import annotations

import json

from sglang_fair.core.errors import ConfigError

DEFAULT_BAND = 1  # a client without a band: after band 0 (interactive), before 2 (batch)
MAX_BAND = 9
NAMED_BANDS = {"interactive": 0, "standard": DEFAULT_BAND, "batch": 2}


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
