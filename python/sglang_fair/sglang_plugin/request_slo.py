"""Per-request SLOs on the HTTP endpoints: a body field ``"slo": {"ttft": 0.5, "tpot": 0.05}``
(seconds; either may be left out) on ``/generate``, ``/v1/completions`` and ``/v1/chat/completions``.

The HTTP process validates the field (a ``ValueError``: SGLang answers 400, or an error event on a
stream, as for its own checks) and carries it to the scheduler in the request's sampling parameters
(``custom_params[PARAM_KEY]``, the private transport SGLang uses for its own per-request settings,
which survives its IPC and the router's payload). A value a client puts there itself is dropped. In
the scheduler :func:`slo_of` gives the request's targets: its own where it set them, else its
client's class (``--batch-slo-classes`` / ``--batch-client-classes``), else the defaults.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

from sglang_fair.batching import SLO, SLOTable
from sglang_fair.sglang_plugin.state import client_of

FIELD = "slo"
PARAM_KEY = "__sglang_fair_slo"
TARGETS = ("ttft", "tpot")

Targets = list[float | None]  # [ttft, tpot], None: the client's class decides


def parse_slo(body: Any) -> Targets | None:
    """The ``slo`` field of a JSON body, validated (``ValueError`` with the reason), or None."""
    if not isinstance(body, dict) or body.get(FIELD) is None:
        return None
    raw = body[FIELD]
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f'"{FIELD}" must be an object like {{"ttft": 0.5, "tpot": 0.05}} (seconds)')
    unknown = sorted(set(raw) - set(TARGETS))
    if unknown:
        raise ValueError(f'"{FIELD}": unknown target {unknown[0]!r}; known: {", ".join(TARGETS)}')
    out: Targets = []
    for name in TARGETS:
        value = raw.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not math.isfinite(value) or value <= 0):
            raise ValueError(f'"{FIELD}.{name}" must be a number of seconds > 0, got {value!r}')
        out.append(None if value is None else float(value))
    return out


def carry(obj: Any, targets: Targets | None) -> None:
    """Put ``targets`` in every sampling-parameter dict of ``obj`` (SGLang's GenerateReqInput), and
    drop a value the client put there."""
    params = obj.sampling_params
    if params is None:
        if targets is None:
            return
        params = obj.sampling_params = {}
    for p in params if isinstance(params, list) else [params]:
        if not isinstance(p, dict):
            continue
        custom = dict(p.get("custom_params") or {})
        custom.pop(PARAM_KEY, None)
        if targets is not None:
            custom[PARAM_KEY] = list(targets)
        p["custom_params"] = custom or None


async def with_request_slo(gen: AsyncIterator[Any], obj: Any, request: Any) -> AsyncIterator[Any]:
    """``gen`` (SGLang's ``generate_request``, not started yet) after the body's ``slo`` is checked
    and carried in ``obj``. The body is Starlette's cached copy (FastAPI and SGLang read it first)."""
    try:
        try:
            body = await request.json()
        except ValueError:  # not JSON: SGLang has refused it already, or it carries no SLO
            body = None
        carry(obj, parse_slo(body))
        async for out in gen:
            yield out
    finally:
        await gen.aclose()  # type: ignore[attr-defined]


def request_targets(req: Any) -> Targets | None:
    """The targets the HTTP process carried in SGLang's ``Req`` (re-checked: None if malformed)."""
    custom = getattr(getattr(req, "sampling_params", None), "custom_params", None)
    value = custom.get(PARAM_KEY) if isinstance(custom, dict) else None
    try:
        return parse_slo({FIELD: dict(zip(TARGETS, value, strict=True))}) if isinstance(value, list) else None
    except (ValueError, TypeError):
        return None


def slo_of(req: Any, table: SLOTable) -> SLO:
    """``req``'s targets: its own where set, else its client's class (or the defaults)."""
    return table.resolve(client_of(req), request_targets(req))
