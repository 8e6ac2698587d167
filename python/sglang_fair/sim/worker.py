"""One worker as SGLang's scheduler loop runs it, with time from a step-time model.

Each step is either a prefill (extend) step or a decode step, as in SGLang without mixed chunked
prefill: a prefill step runs whenever the admission policy admits something (or a chunked prefill
is in progress); otherwise every running request decodes one token. With ``mixed_chunk`` (SGLang's
--enable-mixed-chunk) the running requests also decode in a prefill step when the pool has room.

- Admission: the policy's ``select`` over the waiting queue (:class:`WaitingQueue`: for policies
  that order by the cache, in LPM order with prefix matches kept incrementally), with a
  :class:`StepBudget` that checks the running cap, the chunked-prefill token budget (one request at
  a time may be chunked) and the KV pool, as SGLang 0.5.23's PrefillAdder
  (managers/schedule_policy.py): a new request's uncached input + all its remaining output
  (``add_one_req``; the reused prefix pinned first) must fit in free + evictable tokens minus the
  running requests' remaining output x the new-token ratio (1 for ``ignore_eos`` requests,
  ``_get_running_request_total_token_offset``). The ratio follows SGLang's NewTokenRatioTracker
  (managers/scheduler_components/new_token_ratio_tracker.py): it starts at ``new_token_ratio``,
  decays linearly per decode step to ``new_token_ratio x min_ratio_factor`` over
  ``ratio_decay_steps`` steps, is reset when the worker idles, and after a retraction is set to
  (tokens decoded + 20 x requests) / (their output lengths + 1) over the requests kept. The first
  request that does not fit ends the step's admission, as SGLang's loop (``skip_misfits``: go on).
- The KV pool is shared with the prefix cache (``LocalRadixCache``): a finished prefill puts its
  prompt in the tree (shared while it runs), a finished request its prompt and output; unreferenced
  nodes are evicted least-recently-used when room is needed; evictions are reported to the router.
- Decode allocates one KV token per running request per step; when the pool runs out, requests are
  retracted (fewest output tokens first, then longest input, as SGLang's retract_decode in
  managers/schedule_batch.py) until the batch has room for ``retract_steps`` more steps (SGLang: 1);
  a retracted request re-enters the waiting queue with its prompt and the output produced so far as
  input. Pages are one token (SGLang's page size on the CPU and torch_native/triton/flashinfer
  backends).
- Requests that reach a busy worker wait in an inbox until the step ends (SGLang receives requests
  between steps). Decode steps that nothing can interrupt (no finish, no retraction, nothing new to
  admit) run as one event of up to ``max_decode_steps`` steps, cut short at the next step boundary
  if a request arrives; the result is the same as stepping one by one (tests check it). A failed
  admission is retried only after something changed (arrival, finish, retraction, prefill) or every
  ``retry_every`` steps (fairness counters move as tokens are charged). Decode progress of running
  requests is kept by a per-worker decode clock and applied to a request (``generated``,
  ``reserved``) only when it finishes or is retracted, so a decode event costs O(finished), not
  O(running), beyond one C-level scan of the batch.
"""

from __future__ import annotations

import bisect

from sglang_fair.admission import AdmissionPolicy
from sglang_fair.batching import BatchingConfig, BatchingPolicy, SLOTable
from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.core.radix_cache import Evicted, LocalRadixCache
from sglang_fair.sim.batch import StepBudget, StepOutcome, StepPlan
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.formation import Formation, FormedPlan
from sglang_fair.sim.request import EngineRequest
from sglang_fair.sim.running import RunningBatch
from sglang_fair.sim.steptime import StepShape, StepTimeModel
from sglang_fair.sim.waiting import WaitingQueue

EVICT_BATCH = 4096  # tokens freed at least per eviction (SGLang evicts exactly what it needs)
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS: the ratio estimate after a retraction


class EngineWorker:
    """Waiting queue, running batch, chunked prefill, KV pool + prefix cache, step time."""

    def __init__(self, index: int, policy: AdmissionPolicy, config: EngineConfig,
                 model: StepTimeModel, kv_tokens: int, batching: BatchingPolicy | None = None,
                 slos: SLOTable | None = None) -> None:
        """``batching``: a policy that mixes decodes and prefill chunks forms every step
        (:mod:`sglang_fair.sim.formation`); without one, or with ``sglang``, the worker runs SGLang's
        rule below."""
        self.index = index
        self.policy = policy
        self.config = config
        self.model = model
        self.cache = LocalRadixCache(kv_tokens)
        self.waiting = WaitingQueue(self.cache, policy.orders_by_cache)
        self.batch = RunningBatch()
        self.chunked: EngineRequest | None = None
        self.plan: StepPlan | None = None
        self._evicted: list[Evicted] = []
        self._retracted: list[EngineRequest] = []
        self.inbox: list[EngineRequest] = []
        self._dirty = True  # something that can change admission happened since the last failed try
        self._stale = 0  # steps since the last failed admission try
        self.busy_time = 0.0
        self.steps = 0
        self.ratio = config.new_token_ratio  # SGLang's new-token ratio, now
        self.min_ratio = config.new_token_ratio * config.min_ratio_factor
        self.ratio_decay = (config.new_token_ratio - self.min_ratio) / config.ratio_decay_steps
        self.formation = None if batching is None or not batching.mixes else \
            Formation(self, batching, slos or BatchingConfig().slo_table())

    # ---- queue ---------------------------------------------------------------------------------
    def enqueue(self, req: EngineRequest) -> None:
        if req.input_len + req.output_len > self.cache.capacity:  # not require(): formatted at every call
            raise ConfigError(
                f"request {req.rid} needs {req.input_len + req.output_len} KV tokens, more than the "
                f"pool's {self.cache.capacity}: raise --kv-tokens")
        req.worker = self.index
        if self.plan is None:
            self._accept(req)
        else:  # SGLang receives requests between steps
            self.inbox.append(req)

    def _accept(self, req: EngineRequest) -> None:
        self.waiting.append(req)
        self.policy.on_arrival(req)
        self._dirty = True

    def truncate(self, elapsed: float) -> bool:
        """Stop a multi-step decode plan at the first step boundary at or after ``elapsed``.

        Returns True if the plan got shorter (the host reschedules its end).
        """
        plan = self.plan
        if plan is None or plan.steps == 1:
            return False
        j = bisect.bisect_left(plan.ends, elapsed - 1e-12, 0, plan.steps)
        if j + 1 >= plan.steps:
            return False
        plan.steps = j + 1
        return True

    def idle(self) -> bool:
        return self.plan is None

    # ---- pool ----------------------------------------------------------------------------------
    def future_reservation(self) -> float:
        """KV the running requests are expected to need: ratio x their remaining output (SGLang)."""
        return (1.0 if self.config.ignore_eos else self.ratio) * self.batch.left

    @property
    def running(self) -> list[EngineRequest]:
        """The running requests (read-only view; :class:`RunningBatch` changes them)."""
        return self.batch.reqs

    def reserve(self, n: int) -> bool:
        """Reserve ``n`` pool tokens, evicting LRU cache leaves (reported to the router) if needed."""
        cache = self.cache
        if cache.free_tokens < n:  # evict in batches: each eviction scans the tree once
            evicted = cache.evict(max(n - cache.free_tokens, EVICT_BATCH))
            if not hasattr(cache, "evicted"):
                self._evicted.extend(evicted)
        return cache.alloc(n)

    # ---- step planning ---------------------------------------------------------------------------
    def start_step(self, now: float = 0.0) -> StepPlan | None:
        """Form the next batch (prefill if anything is admitted, else decode; or as the batching
        policy forms it, at time ``now``) and time it."""
        for req in self.inbox:
            self._accept(req)
        self.inbox.clear()
        self.policy.tick(now)
        if self.formation is not None:
            self.plan = self.formation.plan(now)
        else:
            self.plan = self._plan_prefill() or self._plan_decode()
        if self.plan is None:  # idle: SGLang resets the ratio; a host that steps idle workers (the
            self.ratio = self.config.new_token_ratio  # lock-step driver) counts the step as stale
            self._stale += 1
        return self.plan

    def _plan_prefill(self) -> StepPlan | None:
        retry = self.admission_due()
        if self.chunked is None and not (self.waiting and retry):
            return None
        running = len(self.batch)
        mixed = self.config.mixed_chunk and running > 0
        tokens = max(1, self.config.chunk_size - running) if mixed else self.config.chunk_size
        budget = StepBudget(self, tokens, running + (1 if self.chunked else 0))
        if self.chunked is not None:
            req = self.chunked
            chunk = min(req.input_len - req.prefilled, budget.tokens_left)
            budget.batch.append((req, chunk))
            budget.tokens_left -= chunk
        if self.waiting and retry and not budget.exhausted():
            admitted = self.policy.select(self.waiting.view(), budget)
            if admitted:
                self.waiting.remove(admitted)
            else:
                self.admission_failed()
        if not budget.batch:
            return None
        cache, batch = self.cache, budget.batch
        # mixed: the running requests decode in this step if the pool has room (SGLang's
        # check_decode_mem after admission); otherwise they sit out, unretracted
        decoding = running if mixed and cache.free_tokens + cache.evictable_tokens >= running else 0
        decode_context = self.batch.context if decoding else 0
        shape = StepShape.of_prefill([(r.prefilled, n) for r, n in batch], decoding, decode_context)
        return StepPlan("prefill", batch, [self.model.step_time(shape)], decoding=decoding)

    def _plan_decode(self) -> StepPlan | None:
        if not self.batch:
            return None
        self.make_decode_room()
        if not self.batch:
            return self._plan_prefill()
        n = len(self.batch)
        cache = self.cache
        k = min(
            self.batch.steps_to_first_finish(),  # until the first finish
            (cache.free_tokens + cache.evictable_tokens) // n,  # no retraction on the way
            self.config.retry_every if self.waiting else self.config.max_decode_steps,
        )
        k = max(1, k)
        ends, t, context = [], 0.0, self.batch.context
        for j in range(k):
            t += self.model.step_time(StepShape(requests=n, new_tokens=n, context_tokens=context + j * n))
            ends.append(t)
        return StepPlan("decode", [], ends, k, decoding=n)

    def admission_due(self) -> bool:
        """Whether to try admission: something changed, or ``retry_every`` steps passed."""
        return self._dirty or self._stale >= self.config.retry_every

    def admission_failed(self) -> None:
        self._dirty, self._stale = False, 0

    def make_decode_room(self) -> None:
        """Retract running requests until the rest has room for ``retract_steps`` decode steps."""
        cache = self.cache
        if cache.free_tokens + cache.evictable_tokens >= len(self.batch):
            return
        self.batch.sync_all()
        order = sorted(self.running, key=lambda r: (r.generated, -r.input_len), reverse=True)
        while order and cache.free_tokens + cache.evictable_tokens < len(order) * self.config.retract_steps:
            self._retract(order.pop())
        decoded = sum(r.generated for r in order) + RETRACT_DECODE_STEPS * len(order)
        self.ratio = min(1.0, decoded / (sum(r.output_len for r in order) + 1))

    def _retract(self, req: EngineRequest) -> None:
        self.batch.remove(req)
        cache = self.cache
        full = req.full_sequence()
        packed = pack_tokens(full)
        cache.insert(packed)  # its KV stays as evictable cache (SGLang)
        assert req.node is not None
        cache.unlock(req.node)
        cache.release(req.reserved)
        req.node, req.reserved = None, 0
        req.tokens, req.packed, req.prefilled, req.cached_len, req.key = full, packed, 0, 0, None
        self.policy.on_retract(req)
        self.waiting.append(req)
        self._retracted.append(req)
        self._dirty = True

    # ---- step completion -------------------------------------------------------------------------
    def complete_step(self, now: float | None = None) -> StepOutcome:
        """Apply the planned step's effects (tokens, prefill completions, finishes), as of ``now`` if
        given (the policy's clock), and report them."""
        if now is not None:
            self.policy.tick(now)
        plan = self.plan
        assert plan is not None
        self.plan = None
        self.steps += plan.steps
        self._stale += plan.steps
        self.busy_time += plan.duration
        out = StepOutcome(retracted=self._retracted)
        self._retracted = []
        if isinstance(plan, FormedPlan):
            assert self.formation is not None
            self.formation.complete(plan, out)
            self.ratio = max(self.min_ratio, self.ratio - self.ratio_decay) if plan.decoding else self.ratio
        elif plan.kind == "prefill":
            self._complete_prefill(plan, out)
        else:
            self._complete_decode(plan, out)
        for client, n in out.output.items():
            self.policy.on_output(client, n)
        for req in out.finished:
            self._finish(req)
        out.evicted = self._drain_evictions()
        return out

    def _complete_prefill(self, plan: StepPlan, out: StepOutcome) -> None:
        if plan.decoding:  # a mixed step: the running requests decode first
            self._decode(1, out)
        for req, chunk in plan.batch:
            req.prefilled += chunk
            out.extend[req.client] += chunk
            if req.prefilled < req.input_len:
                self.chunked = req
                continue
            if self.chunked is req:
                self.chunked = None
            self.prefill_done(req, out)

    def prefill_done(self, req: EngineRequest, out: StepOutcome) -> None:
        """``req``'s prefill completed: its prompt enters the cache, its first token is out."""
        assert req.node is not None  # the reused prefix, locked at admission
        node = self.cache.insert_below(req.node, req.packed, req.node.depth)[1]  # shared while it runs
        self.cache.lock(node)
        self.cache.unlock(req.node)
        self.cache.release(req.extend_reserved)
        req.node, req.extend_reserved = node, 0
        req.prefills += 1
        self._dirty = True
        if req.prefills == 1:
            out.prefilled.append(req)
        if self.reserve(1):  # the KV slot of the first output token
            req.reserved += 1
        self._emit(req, out)
        if not req.done:
            self.batch.enter(req)

    def _complete_decode(self, plan: StepPlan, out: StepOutcome) -> None:
        require(plan.decoding == len(self.batch), "internal: the batch changed during a decode step")
        self._decode(plan.steps, out)
        out.step_ends = plan.ends[: plan.steps]

    def _decode(self, k: int, out: StepOutcome) -> None:
        """``k`` decode steps of the running batch: one token and one KV slot per request per step."""
        require(self.reserve(len(self.batch) * k), "internal: decode reservation failed")
        out.step_output.update({c: m for c, m in self.batch.clients.items() if m})
        for client, m in out.step_output.items():
            out.output[client] += m * k
        out.finished.extend(self.batch.advance(k))
        self.ratio = max(self.min_ratio, self.ratio - k * self.ratio_decay)

    def _emit(self, req: EngineRequest, out: StepOutcome) -> None:
        req.generated += 1
        out.output[req.client] += 1
        if req.done:
            out.finished.append(req)

    def _finish(self, req: EngineRequest) -> None:
        assert req.node is not None  # its prompt, locked since its prefill
        self.cache.insert_below(req.node, req.output_past_prompt())
        self.cache.unlock(req.node)
        self.cache.release(req.reserved)
        req.node, req.reserved = None, 0
        self.policy.on_finish(req)
        self._dirty = True

    def _drain_evictions(self) -> list[Evicted]:
        log = getattr(self.cache, "evicted", None)
        if isinstance(log, list):
            out = list(log)
            log.clear()
            return out
        out, self._evicted = self._evicted, []
        return out
