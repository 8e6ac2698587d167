"""The evaluation protocol of ``sglang-fair lab paper`` (docs/evidence/results.md, "Protocol").

A :class:`Point` is one configuration (workload, scenario, D, preset, scheduler, quanta, named load);
:func:`run_point` simulates it for one seed with arrivals sustained for ``Protocol.duration`` seconds
and takes every metric over the steady-state window ``[warmup, duration]`` (latency over the programs
arriving in ``[warmup, duration - cooldown]``). Loads are multiples of the capacity measured by
:mod:`sglang_fair.experiments.capacity` with the reference scheduler (RR+LPM) for the point's
:meth:`Point.combo`; :func:`measure_capacity` does that. :func:`aggregate` turns seeds into mean,
min and max.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sglang_fair.admission import ADMISSION_POLICIES, AdmissionConfig
from sglang_fair.core.cost import CostModel
from sglang_fair.experiments.capacity import CapacitySearch, backlog_growth, find_capacity
from sglang_fair.experiments.queueing import mean_decode_batch, mean_wait
from sglang_fair.experiments.scenarios import CLOSED_LOOP
from sglang_fair.metrics import MetricsConfig, summarize_windows
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.sim.steptime import preset
from sglang_fair.workloads import WorkloadConfig

LOADS = {"below": 0.7, "near": 1.0, "above": 1.2}
KEYS = ("throughput", "actual_service_rate", "jain_index", "well_behaved_p50_s", "well_behaved_p99_s",
        "cache_hit_rate", "max_backlogged_service_diff", "retractions", "latency_censored",
        "mean_wait_s", "mean_decode_batch")
SCHEDULERS = {  # router: (name, its usual workers)
    "preble": ("Preble", "preble"), "cache_aware": ("Cache-aware", "lpm"), "client_rr": ("VTC", "vtc"),
    "d2lpm": ("D²LPM", "dlpm"), "d2lpm_guarded": ("D²LPM-guarded", "dlpm"),
    "fair_cache_aware": ("Fair cache-aware", "dlpm_light")}
RR_NAMES = {"lpm": "RR+LPM", "dlpm_light": "RR + dlpm_light"}  # else the admission policy's name
BALANCERS = {"round_robin": "RR LB", "client_hash": "client-hash LB"}  # per_server's, as named in tables
UNSET = {"server_dp": 0, "balancer": "", "eviction_feed": True,  # Point fields not in keys at these values
         "replicas": 1, "replica_share": True, "replica_lag": 0, "max_running": 0}
REFERENCE = ("round_robin", "lpm")  # the scheduler whose capacity names the loads (SGLang's default)
SERIES_BIN_S = 20.0


@dataclass(frozen=True)
class Protocol:
    """Run length and windows: arrivals for ``duration`` s, metrics over [warmup, duration]."""

    duration: float = 600.0
    warmup: float = 120.0
    cooldown: float = 120.0
    capacity_duration: float = 600.0
    capacity_warmup: float = 150.0
    capacity_seeds: int = 2
    capacity_threshold: float = 0.1

    def metrics(self) -> MetricsConfig:
        return MetricsConfig(warmup=self.warmup, steady_state=True, cooldown=self.cooldown)


@dataclass(frozen=True)
class Point:
    """One configuration; the rate is ``load`` x the measured capacity of :meth:`combo`."""

    workload: str
    scenario: str = "none"
    dp: int = 1
    preset: str = "a100-llama8b"
    router: str = "round_robin"
    policy: str = "lpm"
    clients: int = 4
    branches: int = 2
    q_u: float = 0.0
    q_w: float = 0.0
    load: str = "above"
    server_dp: int = 0  # per_server: workers per server (0: one router over all D)
    balancer: str = ""  # per_server: the load balancer over the servers (round_robin, client_hash)
    eviction_feed: bool = True  # the router hears of evictions (a gateway: with --feedback-port)
    replicas: int = 1  # router replicas behind a round-robin balancer (routing/replicas.py)
    replica_share: bool = True  # the replicas tell each other of their dispatches and finishes
    replica_lag: int = 0  # ... after this many later ones
    max_running: int = 0  # requests a worker runs at once at most (0: SGLang's default for the preset)

    def combo(self) -> str:
        """The capacity this point's rate is relative to (measured with 4 clients, as a total rate)."""
        cap = f"/M{self.max_running}" if self.max_running else ""
        return f"{self.workload}/{self.scenario}/D{self.dp}/{self.preset}/B{self.branches}{cap}"

    def key(self) -> str:
        """The fields, ``k=v|...``; the server fields only where set (the keys of runs made before
        they existed stay the same)."""
        return "|".join(f"{k}={v}" for k, v in asdict(self).items() if k not in UNSET or v != UNSET[k])

    @property
    def scheduler(self) -> str:
        """The pair's name in tables and plots; a router with other than its usual workers says which."""
        if not self.eviction_feed:
            return replace(self, eviction_feed=True).scheduler + ", no eviction feed"
        if self.replicas > 1:
            sharing = f"sharing, lag {self.replica_lag}" if self.replica_share else "not sharing"
            return replace(self, replicas=1).scheduler + f", {self.replicas} replicas {sharing}"
        if self.router == "round_robin":
            name = RR_NAMES.get(self.policy, self.policy.upper())
            return "LPM" if name == "RR+LPM" and self.dp == 1 else name
        if self.router == "per_server":
            return f"Per-server, {BALANCERS[self.balancer]}"
        name, usual = SCHEDULERS[self.router]
        return name if self.policy == usual else f"{name} + {self.policy}"


def _workload(point: Point, total_rate: float, duration: float, seed: int) -> WorkloadConfig:
    if point.workload == "arena":  # the trace's own times, compressed: the rate is the time scale
        return WorkloadConfig(workload="arena", clients=point.clients, duration=duration,
                              time_scale=total_rate, seed=seed)
    return WorkloadConfig(workload=point.workload, scenario=point.scenario, clients=point.clients,
                          rate=total_rate / point.clients, duration=duration, seed=seed,
                          branches=point.branches)


def simulate(point: Point, total_rate: float, duration: float, seed: int) -> Any:
    """One run stopped at ``duration`` (arrivals go on until then; a closed-loop workload's rate is
    its programs'); returns the RunResult."""
    router = point.router if point.dp > 1 else "round_robin"
    closed = CLOSED_LOOP.get(point.workload)
    engine = closed.engine if closed else EngineConfig(preset=point.preset)
    if closed and point.preset != Point.preset:
        engine = replace(engine, preset=point.preset)
    engine = replace(engine, max_running=point.max_running or engine.max_running)
    spec = RunSpec(workload=None if closed else _workload(point, total_rate, duration, seed),
                   cluster=ClusterSimConfig(dp=point.dp, max_time=duration,
                                            eviction_feedback=point.eviction_feed,
                                            router_replicas=point.replicas,
                                            replica_sharing=point.replica_share,
                                            replica_lag=point.replica_lag),
                   engine=engine,
                   admission=AdmissionConfig(policy=point.policy, quantum=point.q_u),
                   routing=RouterConfig(policy=router, quantum=point.q_w or RouterConfig.quantum,
                                        server_workers=point.server_dp,
                                        server_balancer=point.balancer or RouterConfig.server_balancer),
                   cost=closed.cost if closed else CostModel())
    programs = closed.programs(point.dp, duration, seed, engine.max_running) if closed else None
    return Simulator(spec, programs).run()


def measure_capacity(point: Point, proto: Protocol, start: float,
                     search: CapacitySearch | None = None) -> dict[str, Any]:
    """The capacity (total programs/s; arena: time scale) of ``point.combo()`` under RR+LPM: the
    backlog growth at a rate is the mean over seeds 0..capacity_seeds-1 (one seed scatters by ~0.1)."""
    if point.workload in CLOSED_LOOP:  # its clients keep their programs in flight: no rate to find
        return {"combo": point.combo(), "capacity": 1.0, "stable": None, "unstable": None, "trials": [],
                "cpu_s": 0.0}
    ref = replace(point, router=REFERENCE[0], policy=REFERENCE[1], q_u=0.0, q_w=0.0, clients=4,
                  server_dp=0, balancer="", eviction_feed=True, replicas=1)

    def growth(rate: float) -> float:
        gs = []
        for seed in range(proto.capacity_seeds):
            res = simulate(ref, rate, proto.capacity_duration, seed=seed)
            gs.append(backlog_growth(res.programs, res.requests, proto.capacity_warmup,
                                     proto.capacity_duration))
        return sum(gs) / len(gs)

    t0 = time.process_time()
    found = find_capacity(growth, search or CapacitySearch(
        start=start, threshold=proto.capacity_threshold, precision=0.15, max_runs=6))
    return {"combo": point.combo(), "capacity": round(found.capacity, 5), "stable": found.stable,
            "unstable": found.unstable, "trials": [[round(r, 5), round(g, 4)] for r, g in found.trials],
            "cpu_s": round(time.process_time() - t0, 1)}


def run_point(point: Point, capacity: float, proto: Protocol, seed: int, series: bool = False
              ) -> dict[str, Any]:
    """Simulate ``point`` at its named load for one seed; the row of results/results.json (with
    per-client service and latency over time if ``series``)."""
    t0 = time.process_time()
    rate = LOADS[point.load] * capacity
    res = simulate(point, rate, proto.duration, seed)
    summary = summarize_windows(res, proto.metrics(), proto.duration)
    row: dict[str, Any] = {**asdict(point), "key": point.key(), "seed": seed, "rate": round(rate, 5),
                           "scheduler": point.scheduler}
    row.update({k: summary.get(k) for k in KEYS})
    row.update(queue_figures(res, proto))
    row["backlog_bound"] = theorem_5_1_bound(point, res)
    row["clients_detail"] = {c: {k: v[k] for k in ("service", "actual_service", "p50_s", "p99_s")}
                             for c, v in summary["clients"].items()}
    if series:
        row["series"] = _series(res)
    row["cpu_s"] = round(time.process_time() - t0, 2)
    return row


def theorem_5_1_bound(point: Point, res: Any) -> float:
    """[1] Thm 5.1's bound on the service difference of clients backlogged at every worker,
    2 |W| (U + Q^u) with U = w_e L_input + w_q M (the run's longest prompt, one worker's KV pool), in
    the cost units of ``max_backlogged_service_diff``."""
    cost, kv = CostModel(), preset(point.preset)[1]
    longest = max((r.input_len for r in res.requests), default=0)
    q_u = point.q_u or getattr(ADMISSION_POLICIES.get(point.policy), "default_quantum", 0.0)
    return round(2 * point.dp * (cost.w_e * longest + cost.w_q * kv + q_u), 1)


def queue_figures(res: Any, proto: Protocol) -> dict[str, float | None]:
    """Mean wait for admission of the calls dispatched in the latency window (unadmitted ones until
    the end) and mean decode batch over the metrics window (:mod:`sglang_fair.experiments.queueing`)."""
    wait = mean_wait(res.requests, proto.warmup, proto.duration - proto.cooldown, res.end_time)
    batch = mean_decode_batch(res.decode_plans, proto.warmup, proto.duration)
    return {"mean_wait_s": None if wait is None else round(wait, 3),
            "mean_decode_batch": None if batch is None else round(batch, 2)}


def _series(res: Any) -> dict[str, dict[str, list[float | None]]]:
    """Per client, per SERIES_BIN_S bin: perceived and actual service rate, and the mean latency of
    the programs arriving in the bin (unfinished ones count until the end: a lower bound)."""
    led, end = res.ledger, res.end_time
    bins = max(1, math.ceil(end / SERIES_BIN_S))
    per = max(1, round(SERIES_BIN_S / led.window))
    out: dict[str, dict[str, list[float | None]]] = {}
    for c in sorted({p.client for p in res.programs}):
        entry: dict[str, list[float | None]] = {}
        for kind in ("perceived", "actual"):
            s = led.series(c, kind, end)
            entry[kind] = [round(sum(s[i * per:(i + 1) * per]) / SERIES_BIN_S, 1) for i in range(bins)]
        lat: list[list[float]] = [[] for _ in range(bins)]
        for p in res.programs:
            if p.client == c:
                x = p.latency()
                lat[min(bins - 1, int(p.arrival / SERIES_BIN_S))].append(end - p.arrival if x is None else x)
        entry["latency"] = [round(sum(v) / len(v), 2) if v else None for v in lat]
        out[c] = entry
    return out


@dataclass
class Spread:
    """Mean and [min, max] over seeds of one metric (None where a seed had no value)."""

    mean: float | None
    lo: float | None
    hi: float | None
    n: int = field(default=0)


def spread(values: list[float | None]) -> Spread:
    xs = [v for v in values if v is not None]
    if not xs:
        return Spread(None, None, None, 0)
    return Spread(sum(xs) / len(xs), min(xs), max(xs), len(xs))


def aggregate(rows: list[dict[str, Any]], keys: tuple[str, ...] = KEYS) -> list[dict[str, Any]]:
    """One entry per point (rows grouped by key, in first-seen order): the point's fields, the seeds,
    and for each metric a :class:`Spread` as a dict {mean, lo, hi, n}."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["key"], []).append(r)
    out = []
    for rs in groups.values():
        entry = {k: rs[0].get(k, UNSET.get(k)) for k in asdict(Point("x")) | {"scheduler": 0, "rate": 0}}
        entry["seeds"] = sorted(r["seed"] for r in rs)
        for k in keys:
            entry[k] = asdict(spread([r.get(k) for r in rs]))
        out.append(entry)
    return out
