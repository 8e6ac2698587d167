"""Per-scheduler fairness state: the core admission policy plus the request adapters it reads.

One :class:`FairState` lives in each SGLang scheduler process that runs a fair policy. The hooks
translate SGLang's events into the core's calls (``base.py`` of the admission package defines them):

    request appended to the waiting queue        -> on_arrival, or on_retract for a running request
    request gone from the waiting queue unrun    -> on_drop (aborted while queued)
    PrefillAdder step                            -> select(waiting, budget)  (charges admission)
    output_ids grew (prefill's first token too)  -> on_output(client, new tokens)
    running request finished or aborted          -> on_finish
    request aborted outside a batch result       -> on_finish / on_drop  (``Scheduler.send_abort_output``:
      e.g. ``retract_decode`` out of memory, which sets ``to_finish`` but never ``finished_reason``)

Charging rule (as in the core): a request's admission cost — for DLPM w_e * (input tokens - the
prefix SGLang's radix cache matched when it was admitted, read after ``init_next_round_input``);
for VTC, as in its paper, w_e * all input tokens — is charged once, at its first admission; a chunked
prefill is one admission, so its later chunks are not charged again; a retracted request admitted
again is not charged again. Output tokens are charged as ``output_ids`` grows: the high-water mark
per request is remembered, so tokens kept across a retraction are never charged twice, and tokens
produced before an abort stay charged. A finished or aborted request leaves the state at once.

Bounded memory: with ``client_ttl`` > 0, a client with nothing waiting or running for that many
seconds is forgotten (``AdmissionPolicy.forget``): it comes back as a new client. Without API keys
any client can already become a new one by sending another id, so this gives no client anything it
could not take anyway, and the fairness bound (between clients backlogged over an interval) is
untouched; with keys the clients are the key file's, and nothing expires (the launcher passes 0).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from operator import attrgetter
from typing import Any

from sglang_fair.admission import AdmissionPolicy, Budget
from sglang_fair.admission.band_names import request_band
from sglang_fair.admission.base import room_of
from sglang_fair.admission.lpm import LpmQueue
from sglang_fair.core.cost import CostModel
from sglang_fair.core.idle_clients import IdleClients
from sglang_fair.metrics.ledger import ServiceLedger
from sglang_fair.sglang_plugin import match_index
from sglang_fair.sglang_plugin.match_index import INDEX_ATTR, MatchIndex

WAITING, RUNNING = "waiting", "running"
FULL_CHECK_EVERY = 16
_RID = attrgetter("rid")


class ReqAdapter:
    """A SGLang ``Req`` seen as the core's ``WaitingRequest`` (``cached_len`` is read live)."""

    __slots__ = ("admitted", "arrival", "band", "client", "input_len", "out_seen", "req", "rid", "status")

    def __init__(self, req: Any, arrival: float, band: int | None = None) -> None:
        self.req = req
        self.rid: Hashable = req.rid
        self.client: str = client_of(req)
        self.input_len: int = len(req.origin_input_ids)
        self.arrival = arrival
        self.status = WAITING
        self.out_seen = len(req.output_ids)
        self.admitted = False
        self.band = band  # its own priority band (bands.py), where its tenant allows request priority

    @property
    def cached_len(self) -> int:
        """The prefix the radix cache matched in SGLang's last match (capped at the input length)."""
        return max(0, min(int(getattr(self.req, "prefix_len", 0) or 0), self.input_len))


class _Tried:
    """A budget that remembers the requests it refused."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.refused: list[ReqAdapter] = []

    def try_add(self, req: Any) -> bool:
        if self.budget.try_add(req):
            return True
        self.refused.append(req)
        return False

    def exhausted(self) -> bool:
        return self.budget.exhausted()

    def room(self) -> int | None:
        room = room_of(self.budget)
        return room() if room is not None else None


def client_of(req: Any) -> str:
    """The client id the HTTP edge put in ``routing_key`` (``default`` if none)."""
    key = getattr(req, "routing_key", None)
    return key if isinstance(key, str) and key else "default"


class FairState:
    """The policy object and the adapters of the requests it knows (waiting or running)."""

    def __init__(self, policy: AdmissionPolicy, client_ttl: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.client_ttl, self.clock = client_ttl, clock
        self.idle = IdleClients(client_ttl)
        self.forgotten = 0
        self.cost: CostModel = policy.cost
        self.waiting: dict[Hashable, ReqAdapter] = {}
        self.running: dict[Hashable, ReqAdapter] = {}
        self.ledger = ServiceLedger(self.cost, window=None)  # tokens and perceived service per client
        self._seq = 0
        self.version = 0  # bumps on every change, for the publisher
        self.queue: LpmQueue[ReqAdapter] = LpmQueue()  # the waiting requests in LPM order
        self.index: MatchIndex | None = None  # set by match() when the tree supports it
        self._matched_tree: Any = None
        self._steps = 0
        self._synced: tuple[int, int, int] | None = None  # (list id, length, version) this step
        self.priority_clients: frozenset[str] = frozenset()  # their requests' `priority` is their band
        self.low_first = False  # SGLang's --schedule-low-priority-values-first

    # ---- queue events --------------------------------------------------------------------------
    def arrive(self, req: Any) -> None:
        """``req`` was appended to the waiting queue: new, or retracted from the running batch."""
        rid = req.rid
        if rid in self.waiting:
            return
        ad = self.running.pop(rid, None)
        if ad is not None:
            self.policy.on_retract(ad)
        else:
            self._seq += 1
            own = self.priority_clients and client_of(req) in self.priority_clients
            ad = ReqAdapter(req, float(self._seq),
                            request_band(getattr(req, "priority", None), self.low_first) if own else None)
            self.policy.tick(self.clock())
            self.policy.on_arrival(ad)
        ad.status = WAITING
        self._touch(ad.client)
        self.waiting[rid] = ad
        self.queue.push(ad)
        if self.index is not None:
            self.index.add(req)
        self.version += 1

    def _leave_waiting(self, rid: Hashable) -> ReqAdapter:
        self.queue.remove(rid)
        if self.index is not None:
            self.index.discard(rid)
        return self.waiting.pop(rid)

    def sync(self, waiting_queue: Sequence[Any]) -> None:
        """Once per scheduler step (calc_priority): :meth:`reconcile` when the queue's length differs
        from the state's, and in full every ``FULL_CHECK_EVERY`` steps. Additions come through the
        hooked ``_add_request_to_queue`` and admissions through the policy, so a removal the state did
        not see (an abort) always shows as a difference in length; the periodic full check guards
        against an addition that bypassed the hook."""
        self._steps += 1
        if len(waiting_queue) != len(self.waiting) or self._steps % FULL_CHECK_EVERY == 0:
            self.reconcile(waiting_queue)
        self._synced = (id(waiting_queue), len(waiting_queue), self.version)

    def reconcile(self, waiting_queue: Sequence[Any]) -> None:
        """Match the state to SGLang's waiting queue: adopt unseen requests, drop vanished ones."""
        known = self.waiting.__contains__
        if len(waiting_queue) == len(self.waiting) and all(map(known, map(_RID, waiting_queue))):
            return  # the same requests (rids are unique), checked without a Python-level loop
        present = set(map(_RID, waiting_queue))
        for req in waiting_queue:
            if req.rid not in self.waiting:
                self.arrive(req)
        for rid in self.waiting.keys() - present:
            ad = self._leave_waiting(rid)
            self.policy.on_drop(ad)
            self._touch(ad.client)
            self.version += 1

    def match(self, tree: Any) -> None:
        """Set every waiting request's cached prefix from ``tree``: only those whose match can have
        changed when the tree supports it (:mod:`match_index`), else all of them."""
        if tree is not self._matched_tree:
            self._matched_tree = tree
            self.index = MatchIndex(getattr(tree, "page_size", 1)) if match_index.supported(tree) else None
            if self.index is not None:
                setattr(tree, INDEX_ATTR, self.index)
                for ad in self.waiting.values():
                    self.index.add(ad.req)
        if self.index is None:
            from sglang.srt.mem_cache.common import match_kv_cache

            for ad in self.waiting.values():
                match_kv_cache(ad.req, tree)
            self.queue.rebuild(self.waiting.values())
            return
        for req in self.index.refresh(tree):
            self.queue.push(self.waiting[req.rid])

    def select(self, waiting_queue: Sequence[Any], budget: Budget) -> list[Any]:
        """Run the policy's admission over the waiting queue; return the admitted SGLang requests.
        Once :meth:`match` runs (cache-ordered policies), the policy gets the queue in LPM order."""
        if self._synced != (id(waiting_queue), len(waiting_queue), self.version):
            self.reconcile(waiting_queue)  # not the list calc_priority just synced
        if self._matched_tree is not None:
            candidates: Sequence[ReqAdapter] = self.queue.ordered()
        else:
            candidates = [self.waiting[r.rid] for r in waiting_queue]
        tried = _Tried(budget)
        self.policy.tick(self.clock())  # a quantum in time measures the worker's service
        admitted = self.policy.select(candidates, tried)
        for ad in admitted:
            self._leave_waiting(ad.rid)
            ad.status = RUNNING
            self.running[ad.rid] = ad
            if not ad.admitted:
                ad.admitted = True
                cached = ad.cached_len
                self.ledger.book(0.0, ad.client, requests=1, input_tokens=ad.input_len,
                                 cached_tokens=cached, extend_tokens=ad.input_len - cached)
        for ad in tried.refused:  # matched afresh by the budget (init_next_round_input)
            if ad.rid in self.waiting:
                self.queue.push(ad)
                if self.index is not None:
                    self.index.adopt(ad.req)
        if admitted:
            self.version += 1
        return [ad.req for ad in admitted]

    # ---- step results --------------------------------------------------------------------------
    def after_step(self) -> None:
        """Charge new output tokens of running requests; retire the finished ones."""
        self._synced = None
        self.policy.tick(self.clock())
        for rid, ad in list(self.running.items()):
            produced = len(ad.req.output_ids)
            if produced > ad.out_seen:
                self.policy.on_output(ad.client, produced - ad.out_seen)
                self.ledger.book(0.0, ad.client, output_tokens=produced - ad.out_seen)
                ad.out_seen = produced
                self.version += 1
            if ad.req.finished():
                del self.running[rid]
                self.policy.on_finish(ad)
                self._touch(ad.client)
                self.version += 1

    def abandon(self, req: Any) -> None:
        """``req`` was aborted outside a batch result (SGLang's ``send_abort_output``): it leaves the
        state now, charged for the output it produced; a request the state does not know is ignored."""
        rid = req.rid
        ad = self.running.pop(rid, None)
        if ad is not None:
            produced = len(ad.req.output_ids)
            if produced > ad.out_seen:
                self.policy.on_output(ad.client, produced - ad.out_seen)
                self.ledger.book(0.0, ad.client, output_tokens=produced - ad.out_seen)
                ad.out_seen = produced
            self.policy.on_finish(ad)
        elif rid in self.waiting:
            ad = self._leave_waiting(rid)
            self.policy.on_drop(ad)
        else:
            return
        self._touch(ad.client)
        self.version += 1

    # ---- bounded memory ------------------------------------------------------------------------
    def _touch(self, client: str) -> None:
        self.idle.touch(client, self.clock())

    def expire(self) -> list[str]:
        """Forget the clients idle for ``client_ttl`` seconds (see the module docstring); cheap when
        none is due (it looks at the oldest only). Returns the forgotten clients."""

        def forget(client: str) -> bool:  # no: still active (a long request) or kept by the policy
            if not self.policy.forget(client):
                return False
            self.ledger.forget(client)
            return True

        gone = self.idle.expire(self.clock(), forget)
        if gone:
            self.forgotten += len(gone)
            self.version += 1
        return gone

    # ---- views ---------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, dict[str, float | int | None]]:
        """Per client: counter, actual and client-perceived service, waiting, running, tokens."""
        views = self.policy.snapshot()
        out: dict[str, dict[str, float | int | None]] = {}
        tokens = self.ledger.tokens
        for client in sorted(set(views) | set(tokens)):
            t = tokens[client]
            view = views.get(client)
            out[client] = {
                "counter": view.counter if view else None,
                "service": view.service if view else 0.0,
                "perceived_service": self.ledger.total(client, "perceived"),
                "waiting": view.queued if view else 0,
                "running": view.running if view else 0,
                "weight": self.cost.weight(client),
                "requests": t.requests,
                "input_tokens": t.input_tokens,
                "cached_tokens": t.cached_tokens,
                "output_tokens": t.output_tokens,
            }
        return out
