"""Batch formation inside the simulator: SGLang's rule is the worker's own loop, mixing policies
conserve tokens and memory (retraction included), and each keeps its defining behaviour there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batching_support import long_prompts

from sglang_fair.admission import AdmissionConfig
from sglang_fair.batching import SLO, BatchingConfig, BatchPlan, DecodeView, PrefillView, StepView
from sglang_fair.batching.simple import SGLangDefault
from sglang_fair.cli import main
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.formation import FormedPlan
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig, make_workload
from sglang_fair.workloads.program import Program

MIXING = ["sarathi", "fairbatching", "slai"]
ANY = SLO(1.0, 1.0)


def _programs(**kw: object) -> list[Program]:
    cfg = WorkloadConfig(**{"workload": "tot", "scenario": "s2", "clients": 3, "rate": 0.6, "duration": 5,
                            "depth": 2, "synthetic_data": True, **kw})  # type: ignore[arg-type]
    return make_workload(cfg, 1)


def _sim(programs: list[Program], batching: str, slo: bool = False, tpot: float = 0.05,
         **engine: Any) -> Simulator:
    spec = RunSpec(None, ClusterSimConfig(), EngineConfig(**engine), AdmissionConfig(policy="fcfs"),
                   RouterConfig(policy="round_robin"), BatchingConfig(policy=batching, tpot=tpot), slo=slo)
    return Simulator(spec, programs)


def _spy(sim: Simulator) -> list[tuple[FormedPlan, int, int]]:
    """Record every formed plan with the running and candidate counts it was formed from."""
    seen: list[tuple[FormedPlan, int, int]] = []
    for w in sim.workers:
        formation = w.formation
        assert formation is not None
        plan = formation.plan

        def spy(now: float, formation: Any = formation, plan: Any = plan, w: Any = w) -> Any:
            out = plan(now)
            if out is not None:
                seen.append((out, len(w.running), len(formation.candidates)))
            return out

        formation.plan = spy  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("name", MIXING)
@pytest.mark.parametrize("kv", [0, 6000])  # 6000: memory pressure, retractions
def test_mixing_policies_serve_every_token_and_free_the_pool(name: str, kv: int) -> None:
    programs = _programs()
    sim = _sim(programs, name, kv_tokens=kv, new_token_ratio=0.0 if kv else 0.7)
    res = sim.run()
    assert all(p.finished >= 0 for p in res.programs)
    assert all(r.generated == r.output_len for r in res.requests)
    if kv:
        assert sum(r.retractions for r in res.requests) > 0
    for w in sim.workers:
        assert not w.running and w.formation is not None and not w.formation.candidates
        assert w.cache.free_tokens + w.cache.evictable_tokens == w.cache.capacity  # nothing leaked


def test_sglang_batching_is_the_workers_own_rule() -> None:
    """At every step of a run, the worker's plan is what SGLangDefault plans for the same inputs."""
    sim = _sim(_programs(), "sglang")
    worker = sim.workers[0]
    assert worker.formation is None
    rule = SGLangDefault(BatchingConfig(token_budget=worker.config.chunk_size))
    original = worker.start_step
    checked = {"prefill": 0, "decode": 0}

    def check(now: float = 0.0) -> Any:
        running = list(worker.running)
        plan = original(now)
        if plan is None:
            return None
        decodes = [DecodeView(r.rid, r.arrival, 0.0, 1, 0.0, 1, ANY) for r in running]
        prefills = [PrefillView(r.rid, r.arrival, r.input_len, r.prefilled, ANY) for r, _ in plan.batch]
        expect = rule.plan(StepView(now, decodes, prefills))
        got = BatchPlan(tuple(r.rid for r in running) if plan.kind == "decode" else (),
                        tuple((r.rid, n) for r, n in plan.batch))
        assert got == expect
        checked[plan.kind] += 1
        return plan

    worker.start_step = check  # type: ignore[method-assign]
    sim.run()
    assert checked["prefill"] > 0 and checked["decode"] > 0


def test_sarathi_runs_every_decode_in_every_step_of_a_run() -> None:
    sim = _sim(_programs(), "sarathi")
    seen = _spy(sim)
    sim.run()
    assert seen and all(len(p.decodes) == running for p, running, _ in seen)
    assert any(p.batch and p.decodes for p, _, _ in seen)  # mixed steps happened


@pytest.mark.parametrize("name", ["fairbatching", "slai"])
def test_slo_aware_policies_defer_decodes_with_slack_while_prefills_wait(name: str) -> None:
    sim = _sim(long_prompts(gap=0.5), name, tpot=0.5 if name == "slai" else 0.05)  # SLAI free tier: 0.5 s
    seen = _spy(sim)
    sim.run()
    assert any(len(p.decodes) < running and cands for p, running, cands in seen)


@pytest.mark.parametrize("name", ["sglang", *MIXING])
def test_slo_recorder_sees_every_token_once(name: str) -> None:
    sim = _sim(_programs(), name, slo=True)
    res = sim.run()
    assert sim.slo is not None
    for rec in res.requests:
        track = sim.slo.tracks[rec.rid]
        assert track.count == rec.output_len
        assert track.ttft == pytest.approx(rec.first_token - rec.arrival)
    summary = sim.slo.summary(res.end_time)
    assert summary["requests"] == len(res.requests) and 0 <= summary["slo_attainment"] <= 1


def test_sim_cli_batching_flags_and_slo_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    small = ["sim", "--workload", "tot", "--scenario", "s2", "--clients", "3", "--depth", "2",
             "--rate", "0.3", "--duration", "5", "--dp", "2", "--synthetic-data",
             "--no-progress"]
    assert main([*small, "--batching", "slai", "--batch-token-budget", "256", "--batch-slo-classes",
                 "paying=0.5/0.1", "--batch-client-classes", "c0=paying", "--json", str(out)]) == 0
    assert "SLO met" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["config"]["batching"]["policy"] == "slai" and doc["config"]["batching"]["token_budget"] == 256
    assert {"ttft_p99", "tpot_p99", "slo_attainment", "goodput"} <= set(doc["slo"])
    assert set(doc["slo"]["classes"]) == {"default", "paying"}


def test_sim_cli_rejects_bad_batching_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as err:
        main(["sim", "--batching", "nope"])
    assert err.value.code != 0 and "invalid choice" in capsys.readouterr().err
    assert main(["sim", "--workload", "tot", "--duration", "1", "--synthetic-data",
                 "--batch-client-classes", "a=gold"]) != 0
