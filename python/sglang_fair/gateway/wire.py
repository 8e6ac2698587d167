"""JSON on the gateway's hot path: orjson where it gives exactly what the standard library gives.

:func:`loads` parses with orjson (several times faster than ``json``) and falls back to ``json`` where
the two differ: text orjson refuses (``NaN``, ``Infinity``, a byte-order mark, a lone surrogate) and
integers outside 64 bits, which orjson reads as floats (a body with a run of 19 digits is parsed by
``json``; the run is found by translating every digit to ``0``: a regular expression took 76 µs on a
1.2 kB chat body, three times ``json.loads``, the translation 5 µs). :func:`with_pin` forwards a
client's body as its own bytes with the gateway's rank pinned, not re-serialised (what the client sent
reaches the server as sent).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
LONG_NUMBER = b"0" * 19  # a run of digits that may be an integer orjson cannot hold (beyond 64 bits)


def parse(data: bytes) -> tuple[Any, bool]:
    """``json.loads(data)``, faster (raises ``ValueError`` or ``UnicodeDecodeError`` as it does), and
    whether orjson read it: then it holds no value that :func:`dumps` would write otherwise."""
    if LONG_NUMBER not in data.translate(DIGITS_AS_ZERO):
        try:
            return orjson.loads(data), True
        except orjson.JSONDecodeError:
            pass
    return json.loads(data), False


def loads(data: bytes) -> Any:
    """``json.loads(data)``, faster."""
    return parse(data)[0]


def dumps(value: Any, plain: bool) -> bytes:
    """``json.dumps(value)`` as bytes; by orjson when ``plain`` (from :func:`parse`: orjson writes
    ``NaN`` as ``null``, and refuses integers beyond 64 bits)."""
    return orjson.dumps(value) if plain else json.dumps(value).encode()


def with_pin(raw: bytes, body: dict[str, Any], drop: tuple[str, ...], pin: tuple[str, int] | None) -> bytes:
    """``raw`` (the bytes of the JSON object ``body``) without the fields ``drop`` and with ``pin``
    (name, value) added: the client's bytes with the pin spliced in before the closing brace, or, when
    a field is to be dropped, ``body`` serialised again."""
    if any(name in body for name in drop):
        out = {k: v for k, v in body.items() if k not in drop}
        if pin is not None:
            out[pin[0]] = pin[1]
        return json.dumps(out).encode()
    if pin is None:
        return raw
    end = raw.rindex(b"}")
    field = b'"%s":%d' % (pin[0].encode(), pin[1])
    return raw[:end] + (b"," if body else b"") + field + raw[end:]
