"""A soak of the :mod:`~sglang_fair.harness.cluster`: open-loop traffic at a fraction of the measured
capacity, one row a minute (``sglang-fair lab cluster-soak`` and its short test).

Capacity is what the cluster answers per second with three times the clients' closed-loop requests in
flight. The soak then starts each client's requests at Poisson times, in the clients' shares of
``load`` x capacity, and after every minute records the requests answered and failed, the latency, every
process's resident memory, and each client's service that minute (the servers' ``/fairness``: w_e x
uncached input + w_q x output tokens) with Jain's index over service / weight.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from sglang_fair.core.cost import CostModel
from sglang_fair.harness.chaos import fairness_totals
from sglang_fair.harness.cluster import Cluster
from sglang_fair.harness.traffic import Spec, Traffic
from sglang_fair.metrics.stats import jain_index, percentile


def memory(cluster: Cluster) -> dict[str, float]:
    """Resident MiB of every process of every server and gateway, as ``name/process``."""
    import psutil

    out: dict[str, float] = {}
    for proc in cluster.procs():
        if proc.popen is None:
            continue
        root = psutil.Process(proc.popen.pid)
        for p in [root, *root.children(recursive=True)]:
            try:
                command = " ".join(p.cmdline())
                role = next((r for r in ("scheduler", "detokenizer") if r in command), "main")
                key = f"{proc.name}/{role}"
                while key in out:  # a second process of the role (the launcher's HTTP server)
                    key += "+"
                out[key] = round(p.memory_info().rss / 2**20, 1)
            except psutil.Error:
                continue
    return out


def capacity(cluster: Cluster, specs: Sequence[Spec], seconds: float, deadline: float = 60.0) -> float:
    """Requests answered per second with three times each closed-loop client's concurrency (the first
    fifth of ``seconds`` is warm-up)."""
    heavy = [dataclasses.replace(s, concurrency=3 * s.concurrency, rate=0.0) for s in specs]
    traffic = Traffic(cluster.balancer.url, heavy, deadline).start()
    began = time.monotonic()
    time.sleep(seconds)
    traffic.stop()
    warm = began + seconds / 5
    ok = [r for r in traffic.snapshot() if r.outcome == "ok" and warm <= r.ended <= began + seconds]
    return len(ok) / (seconds * 4 / 5)


def at_rate(specs: Sequence[Spec], total: float) -> list[Spec]:
    """``specs`` as open-loop clients sharing ``total`` requests per second as their concurrencies do."""
    weight = sum(s.concurrency for s in specs)
    return [dataclasses.replace(s, rate=total * s.concurrency / weight) for s in specs]


def service(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
            cost: CostModel) -> dict[str, float]:
    """Each client's service between two :func:`fairness_totals`."""
    def of(row: dict[str, int]) -> float:
        uncached = row["input_tokens"] - row["cached_tokens"]
        return cost.extend_cost(uncached) + cost.output_cost(row["output_tokens"])

    zero = {"input_tokens": 0, "cached_tokens": 0, "output_tokens": 0}
    return {c: round(of(after[c]) - of(before.get(c, zero)), 1) for c in after}


def soak(cluster: Cluster, specs: Sequence[Spec], minutes: int, weights: dict[str, float],
         on_minute: Callable[[dict[str, Any]], None] = lambda row: None, deadline: float = 60.0,
         minute: float = 60.0) -> list[dict[str, Any]]:
    """Run ``specs`` (open loop) for ``minutes``; one row per minute (also given to ``on_minute``)."""
    cost, rows = CostModel(), []
    traffic = Traffic(cluster.balancer.url, specs, deadline).start()
    start = last = time.monotonic()
    totals = fairness_totals(cluster)
    try:
        for m in range(1, minutes + 1):
            time.sleep(max(0.0, start + m * minute - time.monotonic()))
            now, now_totals = time.monotonic(), fairness_totals(cluster)
            ended = [r for r in traffic.snapshot() if last <= r.ended < now]
            served = service(totals, now_totals, cost)
            mine = {c: served.get(c, 0.0) for c in weights}
            rows.append({
                "minute": m, "answered": sum(r.outcome == "ok" for r in ended),
                "failed": sum(r.outcome != "ok" for r in ended),
                "failures": sorted({f"{r.outcome}: {r.detail[:120]}" for r in ended
                                    if r.outcome != "ok"})[:3],
                "p50_s": round(percentile([r.ended - r.sent for r in ended], 50), 2) if ended else None,
                "p99_s": round(percentile([r.ended - r.sent for r in ended], 99), 2) if ended else None,
                "service": mine, "jain": round(jain_index([mine[c] / weights[c] for c in weights]), 3),
                "memory_mib": memory(cluster)})
            on_minute(rows[-1])
            last, totals = now, now_totals
    finally:
        traffic.stop()
    return rows


def growth(rows: Sequence[dict[str, Any]], after_minute: int) -> dict[str, float]:
    """Per process: resident MiB at the last row minus at row ``after_minute`` (the first row if
    there are fewer)."""
    first = rows[min(after_minute, len(rows)) - 1]["memory_mib"]
    last = rows[-1]["memory_mib"]
    return {p: round(last[p] - first[p], 1) for p in last if p in first}
