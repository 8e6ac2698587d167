"""The router's state and decisions, free of sockets and clocks (time is passed in).

Decisions the paper leaves open, taken here:
- Requests in flight on a worker that stops answering are failed back to their clients with a
  clear reason, not re-dispatched: the router cannot tell whether the worker had already streamed
  part of the answer, and running it again elsewhere could show the client two different partial
  answers or repeat side effects. Clients (and SGLang's own retry logic) can resubmit.
- A worker counts as dead once it has been silent for ``heartbeat_timeout``: since its last message,
  or, if it never sent one, since the router first sent it a request (a worker still starting, with
  nothing to do, is not dead: SGLang loads every model before it takes requests). Heartbeats come
  from a thread, so a long model step does not silence them; a worker whose loop has not moved for
  ``stall_timeout`` while it has requests in flight counts as dead too (hung).
- A dead worker's queue size is reset and the global tree forgets what it cached; if it comes back
  (a heartbeat arrives), it starts as an empty worker.
- A request retracted inside a worker (KV pressure) stays on that worker: it still counts in the
  worker's queue size and is charged once, at its finish, for all the output it produced.
- A finished or aborted request charges w_q x the output tokens it produced to q[client][worker]
  ([1] Alg. 2, line 22); an abort before any output charges nothing more. Feedback for a request the
  router does not know (after a router restart, or duplicated) changes no counter and no queue size.
- The global tree is bounded by ``max_tree_tokens`` with least-recently-used pruning.
- After a router restart everything starts empty: zero counters, empty tree, zero queues; the router
  then asks every worker what it holds (``Hello``), and the requests a worker names (``Holding``) are
  in flight again (charged no input; their finish charges output as usual), so a worker that dies
  later still fails them.
- Overload: a client with ``client_max_inflight`` requests in flight gets its next one refused
  (:class:`ClientOverLimit`; 429 with ``Retry-After`` at the edge), before routing, so D²LPM charges
  nothing for it.
- Queue sizes are reconciled with the workers' heartbeats: a ``Finished`` that never arrives (dropped
  by a worker whose router was unreachable, say) would otherwise count in a queue forever. A request
  is *settled* on a worker once the worker's loop has been seen to turn after ``SETTLE_S`` seconds past
  its dispatch (so the worker has polled it); the worker's own count of routed requests it holds
  (``Heartbeat.inflight``) then includes every settled request still there. When two heartbeats in a
  row report fewer than the settled requests, the smaller shortfall of the two, oldest first, is taken
  as lost: removed, charged no output, counted as ``reconciled``. Two in a row, because a ``Finished``
  may still be on its way when a heartbeat (another socket) overtakes it.
- Bounded memory: a client with no request in flight for ``client_ttl`` seconds is forgotten (its
  D²LPM counters go; it comes back as a new client, at 0). Without API keys any client can become a new
  one by sending another id, so this gives no client anything it could not take, and Thm 5.1's bound
  (between clients backlogged over an interval) is untouched; with keys ``serve`` passes 0 (never).
- A request the router cannot send (the worker's send backlog is full: a stalled worker) is failed at
  once, like a dead worker's (:meth:`RouterState.fail`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sglang_fair.core.global_tree import WIDTH
from sglang_fair.routing import RoutingPolicy
from sglang_fair.routing.base import WorkerLoad
from sglang_fair.routing.clients import ClientBook, ClientOverLimit
from sglang_fair_router.frontend_msgs import Submit
from sglang_fair_router.worker_msgs import Evicted, Finished, Heartbeat, Holding, Load

SETTLE_S = 1.0  # a dispatch has surely reached a live worker's inbox this long after it was sent


@dataclass
class InFlight:
    worker: int
    client: str
    sent_at: float = 0.0


class RouterState:
    """Routing policy + requests in flight + worker liveness."""

    def __init__(self, policy: RoutingPolicy, heartbeat_timeout: float,
                 stall_timeout: float = math.inf, client_ttl: float = 0.0,
                 client_max_inflight: int = 0) -> None:
        self.policy = policy
        self.clients = ClientBook(client_ttl, client_max_inflight, "router")
        self.heartbeat_timeout, self.stall_timeout = heartbeat_timeout, stall_timeout
        self.progress: list[tuple[int, float] | None] = [None] * len(policy.workers)  # (loops, since)
        self.inflight: dict[str, InFlight] = {}
        self.last_seen: list[float | None] = [None] * len(policy.workers)
        self.reported: list[int | None] = [None] * len(policy.workers)  # the worker's own in-flight count
        self.budget: list[int | None] = [None] * len(policy.workers)  # its last prefill budget report
        self.turned_at: list[float | None] = [None] * len(policy.workers)  # last heartbeat whose loops moved
        self.shortfall = [0] * len(policy.workers)  # the previous heartbeat's count of lost requests
        self.send_backlog = [0] * len(policy.workers)  # messages waiting to be sent (set by the service)
        self.counts = {"dispatched": 0, "finished": 0, "failed": 0, "evicted": 0, "ignored_feedback": 0,
                       "dropped": 0, "reconciled": 0,
                       "forgotten_clients": 0, "refused": 0, "resynced": 0}

    def submit(self, msg: Submit, now: float) -> int:
        """Route ``msg``; raises NoWorkerError when every worker is dead, ClientOverLimit when its
        client has ``client_max_inflight`` requests in flight."""
        try:
            self.clients.admit(msg.client)
        except ClientOverLimit:
            self.counts["refused"] += 1
            raise
        worker = self.policy.route(msg)
        if self.last_seen[worker] is None:
            self.last_seen[worker] = now  # its silence counts from now on
        self._enter(msg.rid, worker, msg.client, now)
        self.counts["dispatched"] += 1
        return worker

    def _enter(self, rid: str, worker: int, client: str, now: float) -> None:
        """``rid`` of ``client`` is in flight on ``worker`` (the twin of :meth:`_leave`)."""
        self.inflight[rid] = InFlight(worker, client, now)
        self.clients.enter(client, now)

    def _leave(self, rid: str, output_tokens: int = 0, finished: bool = True) -> InFlight:
        """``rid`` is no longer in flight: its queue slot is freed (``finished``: and charged)."""
        entry = self.inflight.pop(rid)
        if finished:
            self.policy.on_finish(entry.worker, entry.client, output_tokens)
        self.clients.leave(entry.client)
        return entry

    def expire(self, now: float) -> list[str]:
        """Forget the clients without a request in flight for ``client_ttl`` seconds."""
        gone = self.clients.expire(now)
        for client in gone:
            self.policy.forget(client)
        self.counts["forgotten_clients"] += len(gone)
        return gone

    def abort(self, rid: str) -> int | None:
        """The worker to cancel ``rid`` on, if it is in flight (the finish comes back as feedback)."""
        entry = self.inflight.get(rid)
        return None if entry is None else entry.worker

    def fail(self, rid: str) -> None:
        """``rid`` could not be sent to its worker: forget it (its client is told by the caller)."""
        if rid in self.inflight:
            self._leave(rid)
            self.counts["failed"] += 1

    def feedback(self, msg: Finished | Evicted | Heartbeat | Holding, now: float) -> None:
        if msg.worker >= len(self.last_seen):
            self.counts["ignored_feedback"] += 1
            return
        self.last_seen[msg.worker] = now
        if msg.worker not in self.policy.alive:
            self.policy.mark_alive(msg.worker)  # back from the dead: starts empty
        if isinstance(msg, Heartbeat):
            self.reported[msg.worker] = msg.inflight
            if msg.prefill_budget is not None:  # FairBatching's PAB (pab routes by it)
                self.budget[msg.worker] = msg.prefill_budget
                self.policy.on_prefill_budget(msg.worker, msg.prefill_budget)
            if msg.load is not None:
                self.policy.on_load(msg.worker, load_of(msg.load))
            seen = self.progress[msg.worker]
            if seen is None or seen[0] != msg.loops:
                self.progress[msg.worker] = (msg.loops, now)
                turned = self.turned_at[msg.worker]
                if turned is not None:
                    self._reconcile(msg.worker, turned - SETTLE_S, msg.inflight)
                self.turned_at[msg.worker] = now
        elif isinstance(msg, Finished):
            entry = self.inflight.get(msg.rid)
            if entry is None or entry.worker != msg.worker:
                self.counts["ignored_feedback"] += 1
                return
            self._leave(msg.rid, msg.output_tokens)
            self.clients.touch(entry.client, now)
            self.counts["finished"] += 1
        elif isinstance(msg, Holding):
            self._resync(msg, now)
        elif isinstance(msg, Evicted):
            self.policy.on_evict(msg.worker, msg.tokens, min(msg.start, len(msg.tokens) // WIDTH))
            self.counts["evicted"] += 1

    def _resync(self, msg: Holding, now: float) -> None:
        """A worker named what it holds (after this router started): unknown requests are in flight."""
        for rid, client in zip(msg.rids, msg.clients, strict=True):
            if rid in self.inflight:
                continue
            self.policy.queue[msg.worker] += 1  # what route() counts for a dispatch
            self._enter(rid, msg.worker, client, now)
            self.counts["resynced"] += 1

    def _reconcile(self, worker: int, before: float, reported: int) -> None:
        """Drop the requests ``worker`` has lost (see the module docstring): those dispatched before
        ``before`` that its loop has since polled, beyond the ``reported`` count, twice in a row."""
        settled = [rid for rid, e in self.inflight.items() if e.worker == worker and e.sent_at < before]
        shortfall = len(settled) - reported
        lost = min(shortfall, self.shortfall[worker])
        self.shortfall[worker] = max(0, shortfall)
        if lost <= 0:
            return
        for rid in settled[:lost]:
            self._leave(rid)
        self.counts["reconciled"] += lost
        self.shortfall[worker] = 0

    def check_liveness(self, now: float) -> list[tuple[str, str]]:
        """Mark silent workers dead; return (rid, reason) for every request that must fail."""
        failed: list[tuple[str, str]] = []
        for worker in list(self.policy.alive):
            reason = self._failure(worker, now)
            if reason is None:
                continue
            self.policy.mark_dead(worker)
            self.progress[worker] = self.turned_at[worker] = None
            self.shortfall[worker] = 0
            lost = [rid for rid, e in self.inflight.items() if e.worker == worker]
            for rid in lost:
                self._leave(rid, finished=False)  # mark_dead reset the queue already
                failed.append((rid, reason))
        self.counts["failed"] += len(failed)
        return failed

    def _failure(self, worker: int, now: float) -> str | None:
        """Why ``worker`` counts as dead now, or None."""
        seen, progress = self.last_seen[worker], self.progress[worker]
        if seen is not None and now - seen > self.heartbeat_timeout:
            return f"worker {worker} stopped answering ({now - seen:.1f} s without a heartbeat)"
        busy = self.policy.queue[worker]
        if progress is not None and busy and now - progress[1] > self.stall_timeout:
            return (f"worker {worker} is stuck (its loop has not moved for {now - progress[1]:.0f} s "
                    f"with {busy} requests in flight)")
        return None

    def snapshot(self) -> dict[str, Any]:
        """The read-only view served as JSON: tree size, per-worker queues and cache estimate, q, and
        the client weights in force (the tenant file's after a reload)."""
        policy, tree = self.policy, self.policy.tree
        return {
            "policy": policy.name,
            "tree_tokens": tree.tokens,
            "tree_nodes": tree.nodes,
            "inflight": len(self.inflight),
            "counts": dict(self.counts),
            "workers": [
                {"worker": w, "alive": w in policy.alive, "queue": policy.queue[w],
                 "reported_inflight": self.reported[w], "send_backlog": self.send_backlog[w],
                 "prefill_budget": self.budget[w],
                 "capacity": policy.capacity[w], "load": _load_view(policy.reports[w]),
                 "cached_tokens_estimate": tree.worker_tokens[w],
                 "hit_estimate": policy.hit_estimate(w)}
                for w in policy.workers
            ],
            "deficits": policy.counter_view(),
            "weights": dict(policy.config.cost.client_weights),
        }


def load_of(load: Load) -> WorkerLoad:
    """A heartbeat's load report as the routing policy reads it."""
    return WorkerLoad(load.running, load.waiting, load.service_rate, load.max_running, load.knee)


def _load_view(load: WorkerLoad | None) -> dict[str, Any] | None:
    return None if load is None else load._asdict()
