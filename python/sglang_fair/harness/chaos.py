"""Faults injected into a running :class:`~sglang_fair.harness.cluster.Cluster` under traffic, and what
the records say about each (``sglang-fair lab chaos``).

A fault is injected, held, then ended (SIGCONT, the link mended, the killed process started again with
an empty cache). Per fault, from the :class:`~sglang_fair.harness.traffic.Record` of every request: the
requests in flight when it began, the outcomes of every request that overlapped it, the slowest of them,
those it hurt (failed, or slower than ``SLOW_S``), and the time from its end until completions per second
are back to ``RECOVERED`` of the rate before it; what the load balancer counted meanwhile, and for a
gateway's fault the requests that gateway was relaying and how soon HAProxy took it out.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sglang_fair.harness.cluster import ADMIN, Cluster
from sglang_fair.harness.proc import Proc
from sglang_fair.harness.server import get_json
from sglang_fair.harness.traffic import Record, SlowReader, Spec, Traffic

RECOVERED = 0.8  # of the completions per second before the fault
RECOVERY_GOAL_S = 30.0  # completions back to RECOVERED of the baseline within this long after a fault
RESTART_S = 90.0  # a server started again on this machine (budget; measured 30-60 s)
BALANCER_GOAL_S = 5.0  # a faulty gateway out of HAProxy: two failed checks, one a second, 1 s each
WINDOW_S = 5.0  # completions are counted over the last WINDOW_S seconds
DEADLINE_S = 60.0  # a client gives up on a request after this long
SLOW_S = 5.0  # a request that took longer was hurt by the fault (they take under 2 s without one)
SERVER_ARGS = ("--max-running-requests", "8", "--max-total-tokens", "6000")
CLIENTS = {"flood": 1.0, "chat": 1.0, "light": 1.0, "batch": 1.0}  # name -> weight
TOKEN_KEYS = ("requests", "input_tokens", "cached_tokens", "output_tokens")  # of a client's /fairness row


@dataclass(frozen=True)
class Fault:
    """One fault: its name, what it does (for the table), how to inject and end it, how long it holds."""

    name: str
    what: str
    inject: Callable[[Cluster], object]
    end: Callable[[Cluster], object]
    hold: float
    target: str = ""  # the process it breaks (a gateway's name: the load balancer should take it out)


def _proc(cluster: Cluster, name: str) -> Proc:
    return next(p for p in cluster.procs() if p.name == name)


def stop_fault(name: str, target: str, hold: float, scheduler_only: bool = False) -> Fault:
    part = "its scheduler" if scheduler_only else "the whole process group"
    return Fault(name, f"SIGSTOP {target} ({part}) for {hold:g} s, then SIGCONT",
                 lambda c: _proc(c, target).signal(signal.SIGSTOP, scheduler_only),
                 lambda c: _proc(c, target).signal(signal.SIGCONT, scheduler_only), hold, target)


def kill_fault(name: str, target: str, hold: float, scheduler_only: bool = False) -> Fault:
    def inject(c: Cluster) -> None:
        if scheduler_only:
            _proc(c, target).signal(signal.SIGKILL, scheduler_only=True)
        else:
            _proc(c, target).kill()

    def end(c: Cluster) -> None:
        _proc(c, target).kill()  # what SGLang left of a server whose scheduler died
        _proc(c, target).restart(300.0)

    part = "its scheduler" if scheduler_only else "the whole process group"
    again = "started again (an empty cache)" if target.startswith("server") else "started again"
    return Fault(name, f"kill -9 {target} ({part}); {hold:g} s later {again}", inject, end, hold, target)


def link_fault(name: str, server: str, hold: float) -> Fault:
    return Fault(name, f"{server}'s feedback link to both gateways cut for {hold:g} s (a partition)",
                 lambda c: c.links[server].cut(), lambda c: c.links[server].mend(), hold)


def slow_reader_fault(name: str, hold: float) -> Fault:
    readers: list[threading.Thread] = []

    def inject(c: Cluster) -> None:
        reader = SlowReader(c.gateways[0].url, c.keys[ADMIN], hold)
        readers.append(threading.Thread(target=reader.run, daemon=True))
        readers[-1].start()

    def end(c: Cluster) -> None:
        for reader in readers:
            reader.join(120)

    return Fault(name, f"a client reads one chunk of a 400-token stream, then nothing for {hold:g} s",
                 inject, end, hold)


FAULTS = {f.name: f for f in [
    kill_fault("scheduler-kill", "server-b", 10, scheduler_only=True),
    stop_fault("scheduler-stop", "server-a", 20, scheduler_only=True),
    kill_fault("server-kill", "server-b", 10),
    stop_fault("server-stop", "server-a", 20),
    kill_fault("gateway-kill", "gateway-1", 10),
    stop_fault("gateway-stop", "gateway-2", 20),
    link_fault("feedback-drop", "server-a", 30),
    slow_reader_fault("slow-reader", 30),
]}


@dataclass(frozen=True)
class Window:
    """When a fault's phase ran: the baseline from ``start``, injected at ``begin``, ended at ``end``
    (recovery counted from here), watched until ``until``."""

    start: float
    begin: float
    end: float
    until: float


def done_rate(records: Sequence[Record], start: float, end: float) -> float:
    """Requests answered whole (``ok``) per second among those that ended in [start, end)."""
    return sum(1 for r in records if r.outcome == "ok" and start <= r.ended < end) / max(1e-9, end - start)


def recovery_time(records: Sequence[Record], window: Window, step: float = 0.5) -> float | None:
    """Seconds after ``window.end`` until the rate over the last ``WINDOW_S`` s is back to
    ``RECOVERED`` of the baseline (None: not within the watch)."""
    base = done_rate(records, window.start, window.begin)
    t = window.end + step
    while t <= window.until:
        if done_rate(records, max(window.end - WINDOW_S, t - WINDOW_S), t) >= RECOVERED * base:
            return round(t - window.end, 1)
        t += step
    return None


def fault_row(fault: Fault, records: Sequence[Record], window: Window) -> dict[str, Any]:
    """The table row of one fault (every request that was in flight at some time of the fault)."""
    overlapping = [r for r in records if r.sent < window.end and r.ended > window.begin]
    bad = [r for r in overlapping if r.outcome != "ok"]

    return {
        "fault": fault.name, "what": fault.what,
        "in_flight_at_start": sum(1 for r in records if r.sent <= window.begin < r.ended),
        "requests": len(overlapping),
        "outcomes": dict(sorted(Counter(r.outcome for r in overlapping).items())),
        "slowest_s": round(max((r.ended - r.sent for r in overlapping), default=0.0), 1),
        "hurt": sum(1 for r in overlapping if hurt(r)),
        "baseline_per_s": round(done_rate(records, window.start, window.begin), 2),
        "recovered_after_s": recovery_time(records, window),
        "failures": sorted({f"{r.outcome}: {r.detail[:160]}" for r in bad})[:6],
    }


def run_fault(cluster: Cluster, records: Callable[[], list[Record]], fault: Fault, baseline: float,
              watch: float, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Baseline, inject, hold, end, watch; the fault's row, with what the load balancer counted over it
    and, for a gateway's fault, how long its health check took to take the gateway out."""
    start = clock()
    time.sleep(baseline)
    begin = clock()
    before = cluster.balancer.stats()
    gateway = next((g for g in cluster.gateways if g.name == fault.target), None)
    held = gateway_in_flight(cluster, gateway) if gateway is not None else None
    fault.inject(cluster)
    out_after = None
    if gateway is not None:
        with contextlib.suppress(TimeoutError):
            out_after = round(cluster.balancer.wait_for("DOWN", fault.hold, fault.target), 1)
    time.sleep(max(0.0, begin + fault.hold - clock()))
    fault.end(cluster)
    end = clock()
    time.sleep(watch)
    row = fault_row(fault, records(), Window(start, begin, end, clock()))
    row["ended_after_s"] = round(end - begin, 1)
    row["balancer"] = balancer_delta(before, cluster.balancer.stats())
    if gateway is not None:
        row["gateway_in_flight"], row["balancer_out_after_s"] = held, out_after
        if out_after is not None:  # requests sent once HAProxy had taken the gateway out (+ 0.5 s)
            later = [r for r in records() if begin + out_after + 0.5 <= r.sent < end]
            row["sent_after_out"] = len(later)
            row["hurt_after_out"] = sum(1 for r in later if hurt(r))
    return row


def hurt(record: Record) -> bool:
    """Failed, or slower than ``SLOW_S``."""
    return record.outcome != "ok" or record.ended - record.sent > SLOW_S


def gateway_in_flight(cluster: Cluster, gateway: Proc) -> int:
    """The requests ``gateway`` itself is relaying now (its fairness page's ``in_flight``)."""
    auth = {"Authorization": f"Bearer {cluster.keys[ADMIN]}"}
    data = get_json(gateway.url + "/fairness/ui/data?series=0", headers=auth)
    return sum(int(r["in_flight"] or 0) for r in data["clients"])


def balancer_delta(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Per gateway: what HAProxy counted between two readings (sessions, retries, redispatches, times
    taken out, seconds down, 5xx answers)."""
    return {gw: {k: int(v) - int(before.get(gw, {}).get(k, 0)) for k, v in row.items() if k != "status"}
            for gw, row in after.items()}


def fairness_totals(cluster: Cluster) -> dict[str, dict[str, int]]:
    """Per client, summed over the servers: requests, input, cached and output tokens their /fairness
    charged."""
    totals: dict[str, dict[str, int]] = {}
    auth = {"Authorization": f"Bearer {cluster.keys[ADMIN]}"}
    for server in cluster.servers:
        for client, row in get_json(server.url + "/fairness", headers=auth)["clients"].items():
            mine = totals.setdefault(client, dict.fromkeys(TOKEN_KEYS, 0))
            for key in mine:
                mine[key] += int(row[key])
    return totals


def charge_check(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
                 records: Sequence[Record]) -> dict[str, dict[str, int]]:
    """Per client: what the servers charged between ``before`` and ``after`` and what its answers say
    (requests, prompt and output tokens); equal when each request was charged once."""
    out = {}
    for client in sorted({r.client for r in records}):
        mine = [r for r in records if r.client == client]
        delta = {k: after.get(client, {}).get(k, 0) - before.get(client, {}).get(k, 0)
                 for k in ("requests", "input_tokens", "output_tokens")}
        out[client] = {**{f"charged_{k}": v for k, v in delta.items()},
                       "answered_requests": len(mine),
                       "answered_input_tokens": sum(r.prompt_tokens for r in mine),
                       "answered_output_tokens": sum(r.completion_tokens for r in mine)}
    return out


def specs(keys: dict[str, str]) -> list[Spec]:
    """The clients of the chaos run and the soak (``CLIENTS``), with their keys."""
    return [Spec("flood", keys["flood"], False, 4, prefix_words=300),
            Spec("chat", keys["chat"], True, 2, prefix_words=100),
            Spec("light", keys["light"], True, 1),
            Spec("batch", keys["batch"], False, 1)]


def drained(cluster: Cluster, timeout: float = 120.0) -> dict[str, Any]:
    """Wait until no server runs or queues a request and no gateway has one in flight; what is left."""
    auth = {"Authorization": f"Bearer {cluster.keys[ADMIN]}"}
    deadline = time.monotonic() + timeout
    while True:
        busy = {s.name: sum(c["running"] + c["waiting"] for c in
                            get_json(s.url + "/fairness", headers=auth)["clients"].values())
                for s in cluster.servers}
        states = {g.name: get_json(g.url + "/gateway/state") for g in cluster.gateways}
        held = {name: {"queue": sum(w["queue"] for w in st["workers"]),
                       "clients_in_flight": st["clients_in_flight"]} for name, st in states.items()}
        left = {"servers": busy, "gateways": held}
        if time.monotonic() > deadline or not (any(busy.values()) or any(
                v for h in held.values() for v in h.values())):
            return left
        time.sleep(1.0)


def check_phase(cluster: Cluster, seconds: float) -> dict[str, Any]:
    """Traffic with no fault, then the charges against the answers and what is left in flight."""
    drained(cluster)
    before = fairness_totals(cluster)
    traffic = Traffic(cluster.balancer.url, specs(cluster.keys), DEADLINE_S).start()
    time.sleep(seconds)
    traffic.stop()
    left = drained(cluster)
    records = traffic.snapshot()
    charges = charge_check(before, fairness_totals(cluster), [r for r in records if r.outcome == "ok"])
    return {"seconds": seconds, "requests": len(records),
            "not_ok": sum(1 for r in records if r.outcome != "ok"), "charges": charges, "left": left}


def fault_seconds(name: str, baseline: float, watch: float) -> float:
    """How long fault ``name``'s phase takes: its baseline, hold and watch (and a killed process's
    restart)."""
    return baseline + FAULTS[name].hold + watch + (RESTART_S if "kill" in name else 0.0)


def goals_missed(rows: list[dict[str, Any]], check: dict[str, Any]) -> list[str]:
    """The goals a chaos run missed (``rows``: a fault's row or ``{"fault", "skipped"}``; ``check``: the
    final check); a run that injected no fault misses the first goal: it checked nothing."""
    missed = []
    if not any("skipped" not in row for row in rows):
        missed.append("no fault was injected (every one skipped: give --minutes more time), so nothing "
                      "was checked under a fault")
    for row in rows:
        if "skipped" in row:
            continue
        outcomes = row["outcomes"]
        if outcomes.get("deadline"):
            missed.append(f"{row['fault']}: {outcomes['deadline']} request(s) past the deadline")
        if other := {k: v for k, v in outcomes.items() if k in ("4xx", "5xx")}:
            missed.append(f"{row['fault']}: {other} (only 503 may fail a request)")
        if outcomes.get("502") and "gateway_in_flight" not in row:  # HAProxy: its gateway dropped the request
            missed.append(f"{row['fault']}: {outcomes['502']} 502 from the load balancer, no gateway faulty")
        if row["recovered_after_s"] is None or row["recovered_after_s"] > RECOVERY_GOAL_S:
            missed.append(f"{row['fault']}: not back to 80% of the baseline within {RECOVERY_GOAL_S:g} s")
        out = row.get("balancer_out_after_s", 0.0)
        if out is None or out > BALANCER_GOAL_S:
            missed.append(f"{row['fault']}: HAProxy did not take the gateway out within "
                          f"{BALANCER_GOAL_S:g} s")
    for client, c in check["charges"].items():
        if any(c[f"charged_{k}"] != c[f"answered_{k}"] for k in ("requests", "input_tokens",
                                                                   "output_tokens")):
            missed.append(f"check: {client} charged {c} (each request once)")
    if check["not_ok"]:
        missed.append(f"check: {check['not_ok']} request(s) failed with no fault")
    if any(check["left"]["servers"].values()) or any(
            v for h in check["left"]["gateways"].values() for v in h.values()):
        missed.append(f"check: left in flight {check['left']}")
    return missed
