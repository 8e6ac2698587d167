"""FairBatching's time-budget chunk sizing inside SGLang (``--batch-policy fairbatching``).

SGLang decodes its whole running batch in every decode step and runs a prefill step whenever one
can be formed (docs/design/batching.md), so of FairBatching's three phases only the prefill chunk is the
plugin's to choose. Per scheduler step:

- the prefill adder's chunk budget (``PrefillAdder.rem_chunk_tokens``, SGLang's
  ``--chunked-prefill-size`` for this step) is lowered to
  :meth:`~sglang_fair.batching.fairbatching.FairBatching.chunk_budget`: the largest chunk whose
  estimated step time stays within the time budget T of the running decodes' slack (with
  ``--enable-mixed-chunk`` the decodes ride in the same step and are counted in it);
- after each forward batch (``Scheduler.process_batch_result``) the step-time model learns the
  batch's measured time, ``now - batch.launch_ts`` (``launch_ts`` is set by ``run_batch``; with the
  overlap scheduler the result is processed one launch later, so the figure also holds that
  launch's CPU work), and each running request's first-token time and token count are recorded for
  its slack.

Time is the host's: ``time.monotonic()`` read at the hook, only differences used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from sglang_fair.batching import SLO, BatchingConfig, DecodeView, PrefillView, StepView
from sglang_fair.batching.fairbatching import FairBatching
from sglang_fair.sglang_plugin.adder import subclass_once
from sglang_fair.sglang_plugin.request_slo import slo_of
from sglang_fair.sglang_plugin.state import client_of


class ChunkSizer:
    """FairBatching's step-time model and the running requests' token times, for one scheduler."""

    def __init__(self, config: BatchingConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = FairBatching(config)
        self.slos = config.slo_table()
        self.clock = clock
        self.first_token: dict[Hashable, float] = {}
        self.slo_by_rid: dict[Hashable, SLO] = {}  # a running request's targets, resolved once
        self.steps = 0

    def _decode(self, req: Any, now: float) -> DecodeView | None:
        first = self.first_token.get(req.rid)
        tokens = len(req.output_ids)
        if first is None or tokens == 0:
            return None
        context = len(req.origin_input_ids) + tokens
        slo = self.slo_by_rid.get(req.rid)
        if slo is None:
            slo = self.slo_by_rid[req.rid] = slo_of(req, self.slos)
        return DecodeView(req.rid, first, first, tokens, now, context, slo, client_of(req))

    def view(self, running: Iterable[Any], chunked: Any = None) -> StepView:
        """The step as FairBatching sees it: the running requests as decodes, SGLang's chunked
        request (if any) as the first prefill candidate with its cached prefix."""
        now = self.clock()
        decodes = [d for d in (self._decode(r, now) for r in running) if d is not None]
        prefills: list[PrefillView] = []
        if chunked is not None:
            prefilled = min(int(getattr(chunked, "prefix_len", 0) or 0), len(chunked.origin_input_ids))
            prefills.append(PrefillView(chunked.rid, now, len(chunked.origin_input_ids), prefilled,
                                        slo_of(chunked, self.slos), client_of(chunked), started=True))
        return StepView(now, decodes, prefills)

    def chunk_tokens(self, running: Iterable[Any], chunked: Any, mixed: bool) -> int | None:
        """This step's prefill chunk budget (None: no running decodes, SGLang's size applies)."""
        return self.policy.chunk_budget(self.view(running, chunked), decodes_ride=mixed)

    def observe(self, batch: Any, extend: bool) -> None:
        """A forward batch's result: learn its time, note first tokens, drop finished requests."""
        now = self.clock()
        reqs = list(batch.reqs)
        for req in reqs:
            if req.finished():
                self.first_token.pop(req.rid, None)
                self.slo_by_rid.pop(req.rid, None)
            elif req.output_ids and req.rid not in self.first_token:
                self.first_token[req.rid] = now
        launched = batch.launch_ts
        if not reqs or launched is None or now < launched:
            return
        new = int(batch.extend_num_tokens or 0) if extend else len(reqs)
        context = sum(len(r.origin_input_ids) + len(r.output_ids) for r in reqs)
        self.policy.on_step(max(new, 1), context, now - launched)
        self.steps += 1

    def prune(self, live: Iterable[Any]) -> None:
        """Forget requests no longer running (aborted or retracted): bounded memory."""
        keep = {r.rid for r in live}
        self.first_token = {rid: t for rid, t in self.first_token.items() if rid in keep}
        self.slo_by_rid = {rid: slo for rid, slo in self.slo_by_rid.items() if rid in keep}


def sized_adder_class(base: type, scheduler: Any, budget: ChunkSizer) -> type:
    """A subclass of ``base`` (SGLang's adder class) whose chunk budget is ``budget``'s for the step."""
    return subclass_once("TimeBudgetPrefillAdder", base, scheduler,
                         lambda: _sized_members(base, scheduler, budget))


def _sized_members(base: type, scheduler: Any, budget: ChunkSizer) -> dict[str, Any]:
    base_init = getattr(base, "__init__")  # noqa: B009 (base is SGLang's PrefillAdder class)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        base_init(self, *args, **kwargs)
        if self.rem_chunk_tokens is None:  # chunked prefill off: SGLang runs whole prompts
            return
        running = self.running_batch.reqs if self.running_batch is not None else ()
        tokens = budget.chunk_tokens(running, scheduler.chunked_req, bool(scheduler.is_mixed_chunk))
        if tokens is not None:
            self.rem_chunk_tokens = min(self.rem_chunk_tokens, tokens)

    return {"__init__": __init__, "__doc__": __doc__}
