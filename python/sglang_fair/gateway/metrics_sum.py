"""``/metrics`` of ``gateway --workers N`` on the shared port: every process's figures, merged.

The kernel gives a scrape of the shared port to any one process, so a per-process counter read there
jumps between processes. With N > 1 the process that gets ``GET /metrics`` reads every sibling's own
``/metrics`` over its Unix socket ``DIR/http-I.sock`` (concurrently, each within :data:`SIBLING_TIMEOUT_S`)
and merges them with its own by :data:`RULES`. A sibling that does not answer 200 in time is left out:
``sglang_fair_gateway_processes_answered`` says how many processes the answer holds (N when whole).

One process alone: ``GET /metrics?process=self`` on the port, or any ``GET /metrics`` on a process's own
Unix socket, which always answers that process's figures only (so the collector's requests to its
siblings, which go there, never merge again: no recursion).

Auth: the collector has checked the caller's admin key itself (``dashboard/gateway_page.py``) and
forwards the caller's key headers (:data:`FORWARDED`) to its siblings, which check them again. Trusting
every caller of the 0700 Unix sockets instead would be simpler, but would make them an unguarded way in
to every guarded endpoint for any process of the gateway's user; forwarding adds no new trust.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import aiohttp

from sglang_fair.gateway.processes import http_socket

SIBLING_TIMEOUT_S = 1.5
FORWARDED = ("authorization", "x-api-key")  # the caller's key, as ``edge.identity.bearer_key`` reads it
ANSWERED = "sglang_fair_gateway_processes_answered"
G, T = "sglang_fair_gateway_", "sglang_fair_tenant_"

#: How each family is merged across the processes (by family name, as the parser gives it: a counter
#: without ``_total``). ``sum``: each process counts its own, the gateway's figure is their sum.
#: ``max``: every process holds the whole gateway's figure already (the replica link shares the
#: routing state; each process polls the same servers; the parent's shared restart count), so summing
#: would count it N times; the largest is the freshest (or, for ``worker_out``, "taken out in some
#: process"). ``process``: a fact of each process, kept per process with a ``process`` label.
#: ``self``: the collecting process's own (which process answered). A family not listed is summed if
#: a counter and kept per process otherwise (never summed by mistake). The tenants' top K is chosen in
#: each process from the same servers' figures, so a tenant at the boundary may, between two polls, be
#: named in one process and in ``__other__`` in another, and ``__other__`` then holds it as well.
RULES: dict[str, str] = {
    G + "client_in_flight": "sum",  # requests this process relays now
    G + "client_answers": "sum",  # answers this process gave
    G + "worker_queue": "max",  # the policy's queue: own + observed from the siblings - finished
    G + "worker_routed": "sum",  # this process's dispatches only
    G + "worker_finished": "max",  # this process's and its siblings' finishes
    G + "worker_out": "max",  # each process probes the servers itself: 1 if any has it out
    G + "failed_over": "sum",
    G + "stale_servers": "max",  # each process polls the servers itself
    G + "backlogged_gap": "max",  # from the servers' figures, which every process polls
    G + "gap_bound": "max",
    G + "duty_restarts": "sum",
    G + "duty_running": "process",  # each process runs its own duties
    G + "processes": "max",
    G + "process_restarts": "max",  # the parent's count, the same in every process
    G + "process_index": "self",
    T + "in_flight": "sum",  # the gateway's own, per process
    **{T + name: "max" for name in ("service", "requests", "input_tokens", "output_tokens", "waiting",
                                    "running")},  # the servers' figures, polled by every process
}


def rule(name: str, kind: str) -> str:
    """The merge rule of family ``name`` of type ``kind`` (see :data:`RULES`)."""
    return RULES.get(name, "sum" if kind == "counter" else "process")


def merge(texts: Mapping[int, str], own: int) -> bytes:
    """The Prometheus text of the processes' ``texts`` (process index -> its own ``/metrics``) merged by
    :data:`RULES`, ``own`` the collecting process, with :data:`ANSWERED` (how many texts there are)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Any] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for index, text in sorted(texts.items()):
        for family in text_string_to_metric_families(text):
            how = rule(family.name, family.type)
            if how == "self" and index != own:
                continue
            families.setdefault(family.name, family)
            into = values.setdefault(family.name, {})
            for sample in family.samples:
                labels = {**sample.labels, "process": str(index)} if how == "process" else sample.labels
                key = (sample.name, tuple(sorted(labels.items())))
                into[key] = combine(how, into.get(key), sample.value)
    answered = GaugeMetricFamily(ANSWERED, "gateway processes whose figures this /metrics holds",
                                 value=len(texts))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Merged([*rebuilt(families, values), answered]))
    return generate_latest(registry)


def combine(how: str, before: float | None, value: float) -> float:
    """One sample's value so far (``before``) with one more process's ``value`` (``process`` and
    ``self`` samples never meet another: their keys are one process's)."""
    if before is None:
        return value
    return max(before, value) if how == "max" else before + value


def rebuilt(families: Mapping[str, Any], values: Mapping[str, Mapping[Any, float]]) -> Iterator[Any]:
    """The parsed ``families`` with their samples replaced by the merged ``values``."""
    from prometheus_client.core import Metric
    from prometheus_client.samples import Sample

    for name, family in families.items():
        out = Metric(name, family.documentation, family.type)
        out.samples = [Sample(sample, dict(labels), value)
                       for (sample, labels), value in values[name].items()]
        yield out


class Merged:
    """A collector of ready families."""

    def __init__(self, families: Iterable[Any]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Any]:
        yield from self.families


def sibling_sockets(own_socket: str, own: int, count: int) -> dict[int, str]:
    """The other processes' Unix sockets (beside ``own_socket``, ``DIR/http-OWN.sock``)."""
    directory = os.path.dirname(own_socket)
    return {i: http_socket(directory, i) for i in range(count) if i != own}


async def read_one(path: str, headers: Mapping[str, str], timeout: float) -> str | None:
    """One sibling's own ``/metrics`` over its Unix socket ``path`` (None: no 200 within ``timeout``)."""
    limit, unix = aiohttp.ClientTimeout(total=timeout), aiohttp.UnixConnector(path=path)
    try:
        async with (aiohttp.ClientSession(connector=unix, timeout=limit) as session,
                    session.get("http://process/metrics", headers=dict(headers)) as resp):
            return await resp.text() if resp.status == 200 else None
    except (aiohttp.ClientError, OSError, TimeoutError):
        return None


async def whole(own_text: bytes, own: int, own_socket: str, count: int, headers: Mapping[str, str],
                timeout: float = SIBLING_TIMEOUT_S) -> bytes:
    """The gateway's ``/metrics``: ``own_text`` merged with every sibling that answers; ``headers``: the
    caller's (lower-cased), of which only :data:`FORWARDED` go on."""
    sent = {k: v for k, v in headers.items() if k in FORWARDED}
    paths = sibling_sockets(own_socket, own, count)
    answers = await asyncio.gather(*(read_one(p, sent, timeout) for p in paths.values()))
    texts = {i: text for i, text in zip(paths, answers, strict=True) if text is not None}
    return merge({**texts, own: own_text.decode()}, own)


def over_unix_socket(scope: Mapping[str, Any]) -> bool:
    """Whether a request came on a Unix socket (uvicorn's ``server`` is then ``(path, None)``)."""
    server = scope.get("server") or ("", 0)
    return server[1] is None
