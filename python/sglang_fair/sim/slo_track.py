"""Per-request token times of a simulation, for SLO metrics (:mod:`sglang_fair.metrics.slo`).

Before a worker applies a step, :meth:`SLORecorder.on_step` notes which requests the step gives a
token and when: every running request in each step of a decode plan (at each step's end); in a
prefill plan, requests whose prefill the step completes (and, in a mixed step, the running requests
that decode beside the chunks), at its end. A multi-step decode plan costs O(running x steps) here,
so the simulator records only when asked (``sglang-fair sim --slo``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sglang_fair.batching import SLOTable
from sglang_fair.metrics.slo import TokenTrack, slo_summary
from sglang_fair.sim.batch import StepPlan
from sglang_fair.sim.formation import FormedPlan
from sglang_fair.sim.request import EngineRequest


class SLORecorder:
    """Token times and SLO targets of every request of a run."""

    def __init__(self, slos: SLOTable) -> None:
        self.slos = slos
        self.tracks: dict[int, TokenTrack] = {}
        self.clients: dict[int, str] = {}

    def on_dispatch(self, req: EngineRequest) -> None:
        slo = self.slos.resolve(req.client, req.slo)
        self.tracks[req.rid] = TokenTrack(req.arrival, slo.ttft, slo.tpot)
        self.clients[req.rid] = req.client

    def on_step(self, plan: StepPlan, running: Iterable[EngineRequest], start: float) -> None:
        """``plan`` (started at ``start``) is about to be applied; ``running``: the worker's batch."""
        tracks = self.tracks
        if plan.kind == "decode" and not isinstance(plan, FormedPlan):
            ends = [start + e for e in plan.ends[: plan.steps]]
            for req in running:
                track = tracks[req.rid]
                for t in ends:
                    track.on_token(t)
            return
        end = start + plan.duration
        decoding = plan.decodes if isinstance(plan, FormedPlan) else running if plan.decoding else []
        for req in decoding:
            tracks[req.rid].on_token(end)
        for req, chunk in plan.batch:
            if req.prefilled + chunk >= req.input_len:
                tracks[req.rid].on_token(end)

    def summary(self, duration: float, by_class: bool = True) -> dict[str, Any]:
        """SLO summary over all requests, and per SLO class if there are several."""
        out = slo_summary(self.tracks.values(), duration)
        classes = {self.slos.class_of(c) for c in self.clients.values()}
        if by_class and len(classes) > 1:
            out["classes"] = {
                name: slo_summary((t for rid, t in self.tracks.items()
                                   if self.slos.class_of(self.clients[rid]) == name), duration)
                for name in sorted(classes)}
        return out
