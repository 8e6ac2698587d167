"""The full simulator: determinism, conservation of tokens, retraction, chunked prefill, timing."""

from __future__ import annotations

from collections import Counter

import pytest

from sglang_fair.admission import AdmissionConfig
from sglang_fair.core.cost import CostModel
from sglang_fair.metrics import RunResult, summarize
from sglang_fair.routing import RouterConfig
from sglang_fair.routing.replicas import Replicas
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.sim.steptime import LinearStepModel
from sglang_fair.sim.worker import EngineWorker
from sglang_fair.workloads import ProgramRun, WorkloadConfig, make_workload
from sglang_fair.workloads.program import Call, Program

PAIRS = [("round_robin", "lpm"), ("preble", "lpm"), ("client_rr", "vtc"), ("d2lpm", "dlpm"),
         ("cache_aware", "fcfs"), ("shortest_queue", "dlpm")]


def _tot(**kw: object) -> list[Program]:
    cfg = WorkloadConfig(**{"workload": "tot", "scenario": "s2", "clients": 3, "rate": 0.4, "duration": 6,
                            "depth": 2, "synthetic_data": True, **kw})  # type: ignore[arg-type]
    return make_workload(cfg, 2)


def _spec(router: str, policy: str, dp: int = 1, cluster: dict[str, float] | None = None,
          engine: dict[str, object] | None = None, admission: dict[str, float] | None = None,
          routing: dict[str, float] | None = None, cost: CostModel | None = None) -> RunSpec:
    """A spec for programs given to the simulator (no workload)."""
    return RunSpec(None, ClusterSimConfig(dp=dp, **(cluster or {})),  # type: ignore[arg-type]
                   EngineConfig(**(engine or {})),  # type: ignore[arg-type]
                   AdmissionConfig(policy=policy, **(admission or {})),
                   RouterConfig(policy=router, **(routing or {})), cost=cost or CostModel())


def _run(programs: list[Program], router: str = "d2lpm", policy: str = "dlpm", dp: int = 2,
         **engine: object) -> RunResult:
    spec = _spec(router, policy, dp, engine=engine, admission={"quantum": 2048}, routing={"quantum": 8192})
    return Simulator(spec, programs).run()


def _check_conservation(programs: list[Program], res: RunResult, cost: CostModel | None = None) -> None:
    cost = cost or CostModel()
    assert all(p.finished >= 0 for p in res.programs)
    requested_in = sum(len(ProgramRun(p).prompt(i)) for p in programs for i in range(len(p.calls)))
    requested_out = sum(c.output_len for p in programs for c in p.calls)
    assert len(res.requests) == sum(len(p.calls) for p in programs)
    assert all(r.generated == r.output_len for r in res.requests)
    perceived = sum(res.ledger.total(c) for c in res.ledger.clients)
    assert perceived == pytest.approx(cost.w_e * requested_in + cost.w_q * requested_out)
    actual = sum(res.ledger.total(c, "actual") for c in res.ledger.clients)
    extend = sum(r.input_len - r.cached_len for r in res.requests)
    assert actual >= cost.w_q * requested_out + cost.w_e * extend - 1e-6


@pytest.mark.parametrize(("router", "policy"), PAIRS)
def test_tokens_served_equal_tokens_requested(router: str, policy: str) -> None:
    programs = _tot()
    _check_conservation(programs, _run(programs, router, policy))


def test_same_seed_same_result() -> None:
    a = summarize(_run(_tot()))
    b = summarize(_run(_tot()))
    assert a == b
    assert summarize(_run(_tot(seed=5))) != a


def test_retraction_under_memory_pressure_conserves_tokens() -> None:
    programs = _tot(scenario="s1", rate=0.6)
    res = _run(programs, "round_robin", "lpm", kv_tokens=6000, max_running=64, new_token_ratio=0.0)
    assert sum(r.retractions for r in res.requests) > 0
    _check_conservation(programs, res)


def test_chunked_prefill_of_a_long_prompt() -> None:
    model = LinearStepModel(fixed=0.01, per_request=0, per_new_token=1e-4, per_context_token=0)
    prompt = tuple(range(5000))
    prog = Program(0, "a", 0.0, (Call((prompt,), 3),))
    sim = Simulator(_spec("round_robin", "fcfs", engine={"chunk_size": 2048}), [prog], model=model)
    res = sim.run()
    # 3 prefill chunks (2048 + 2048 + 904 tokens), then 2 decode steps of one token
    assert res.steps == 5
    expected_ttft = 3 * 0.01 + 5000 * 1e-4
    assert res.programs[0].first_token == pytest.approx(expected_ttft)
    assert res.programs[0].finished == pytest.approx(expected_ttft + 2 * (0.01 + 1e-4))


def test_prefix_reuse_and_closed_loop() -> None:
    model = LinearStepModel(fixed=0.01, per_request=0, per_new_token=1e-4, per_context_token=0)
    prog = _tot(clients=1, scenario="none", rate=0.2)[0]
    res = Simulator(_spec("round_robin", "lpm"), [prog], model=model).run()
    by_call = sorted(res.requests, key=lambda r: r.rid)
    # Calls 0 and 1 sample the question prompt; the next two released are the first finisher's children.
    root = min(by_call[:2], key=lambda r: r.finished)
    for child in by_call[2:4]:  # children start after their parent finished and reuse its prompt + output
        assert child.arrival == pytest.approx(root.finished)
        assert child.cached_len >= root.input_len + root.output_len


def test_client_delay_sends_unblocked_calls_a_round_trip_later() -> None:
    model = LinearStepModel(fixed=0.01, per_request=0, per_new_token=1e-4, per_context_token=0)
    prog = _tot(clients=1, scenario="none", rate=0.2)[0]
    for delay in (0.0, 0.25):
        spec = _spec("round_robin", "lpm", cluster={"client_delay": delay})
        res = Simulator(spec, [prog], model=model).run()
        by_call = sorted(res.requests, key=lambda r: r.rid)
        root = min(by_call[:2], key=lambda r: r.finished)
        assert [c.arrival for c in by_call[2:4]] == pytest.approx([root.finished + delay] * 2)
        assert res.programs[0].finished > 0


def test_feedback_delay_does_not_extend_the_run() -> None:
    programs = _tot()
    fast = _run(programs)
    spec = _spec("d2lpm", "dlpm", 2, cluster={"feedback_delay": 5.0}, admission={"quantum": 2048},
                 routing={"quantum": 8192})
    slow = Simulator(spec, programs).run()
    _check_conservation(programs, slow)
    assert slow.end_time < fast.end_time * 2


def test_router_replicas_finish_the_run_and_sharing_tells_each_of_every_dispatch() -> None:
    programs = _tot()
    known = {}
    for share in (True, False):
        spec = _spec("fair_cache_aware", "dlpm", 2,
                     cluster={"router_replicas": 2, "replica_sharing": share, "replica_lag": 2})
        sim = Simulator(spec, programs)
        res = sim.run()
        _check_conservation(programs, res)
        assert isinstance(sim.router, Replicas)
        sim.router.flush()
        known[share] = [sum(r.routed_tokens) for r in sim.router.replicas]
        total = sum(r.input_len for r in res.requests)
    assert known[True] == [total, total]
    assert min(known[False]) > 0 and sum(known[False]) == total


def test_without_eviction_feedback_the_router_tree_keeps_what_workers_evicted() -> None:
    programs = _tot(rate=1.0)
    runs = {}
    for feed in (True, False):
        spec = _spec("cache_aware", "lpm", 2, cluster={"eviction_feedback": feed}, engine={"kv_tokens": 3000})
        sim = Simulator(spec, programs)
        runs[feed] = (sim.run(), sum(sim.router.tree.worker_tokens.values()))
        _check_conservation(programs, runs[feed][0])
    assert runs[False][1] > runs[True][1]  # the tree still counts the evicted prefixes


def test_summary_has_the_issue_keys() -> None:
    s = summarize(_run(_tot()))
    for key in ("throughput", "actual_service_rate", "jain_index", "well_behaved_p50_s", "well_behaved_p99_s",
                "cache_hit_rate", "max_backlogged_service_diff", "clients"):
        assert key in s
    for v in s["clients"].values():
        assert {"service", "p50_s", "p99_s", "requests"} <= set(v)
    assert s["well_behaved_p50_s"] is not None and 0 < s["cache_hit_rate"] <= 1


def test_client_weights_run() -> None:
    programs = _tot(scenario="none", rate=0.6)
    cost = CostModel(client_weights={"c0": 3.0})
    spec = _spec("round_robin", "vtc", cost=cost)
    res = Simulator(spec, programs).run()
    _check_conservation(programs, res, cost)
    other = Simulator(spec.with_pair("round_robin", "dlpm"), programs).run()
    _check_conservation(programs, other, cost)


def test_pool_is_clean_after_a_run() -> None:
    programs = _tot(scenario="s1", rate=0.6)
    sim = Simulator(_spec("round_robin", "dlpm", 2, engine={"kv_tokens": 6000, "new_token_ratio": 0.0}),
                    programs)
    sim.run()
    for w in sim.workers:
        cache = w.cache
        assert cache.reserved_tokens == 0  # every reservation was released
        assert cache.evictable_tokens == cache.cached_tokens  # no lock left behind
        assert cache.cached_tokens <= cache.capacity
        assert not w.waiting and not w.running and w.chunked is None


@pytest.mark.parametrize(("router", "policy", "kv"), [("d2lpm", "dlpm", 0), ("round_robin", "vtc", 7000)])
def test_multi_step_decode_events_equal_single_steps(router: str, policy: str, kv: int) -> None:
    programs = _tot(scenario="s1", rate=0.5)
    many = summarize(_run(programs, router, policy, kv_tokens=kv))
    one = summarize(_run(programs, router, policy, kv_tokens=kv, max_decode_steps=1, retry_every=1))
    one_retry4 = summarize(_run(programs, router, policy, kv_tokens=kv, max_decode_steps=1))
    assert many == one_retry4  # batching decode steps into one event changes nothing
    assert one["programs_finished"] == many["programs_finished"]


def test_incremental_batch_counters_match_a_recount(monkeypatch: pytest.MonkeyPatch) -> None:
    import sglang_fair.sim.worker as worker

    complete = worker.EngineWorker.complete_step

    def checked(self: worker.EngineWorker, now: float | None = None) -> object:
        out = complete(self, now)
        self.batch.sync_all()
        assert self.batch.left == sum(r.output_len - r.generated for r in self.running)
        assert self.batch.clients == Counter(r.client for r in self.running)
        assert self.batch.context == sum(len(r.tokens) + r.generated for r in self.running)
        held = sum(r.reserved + r.extend_reserved for r in self.running)
        held += self.chunked.extend_reserved if self.chunked else 0
        assert held == self.cache.reserved_tokens
        return out

    monkeypatch.setattr(worker.EngineWorker, "complete_step", checked)
    programs = _tot(scenario="s1", rate=0.6)
    res = _run(programs, "round_robin", "dlpm", kv_tokens=6000, new_token_ratio=0.0)
    assert sum(r.retractions for r in res.requests) > 0
    _check_conservation(programs, res)


def test_evictions_reach_the_router_after_the_delay() -> None:
    programs = _tot(scenario="s1", rate=0.6)
    spec = _spec("d2lpm", "dlpm", 2, cluster={"feedback_delay": 0.5},
                 engine={"kv_tokens": 6000, "new_token_ratio": 0.0})
    sim = Simulator(spec, programs)
    seen: list[tuple[float, int]] = []
    original = sim.router.on_evict

    def on_evict(worker: int, tokens: object, start: int = 0) -> None:
        seen.append((sim.now, worker))
        original(worker, tokens, start)  # type: ignore[arg-type]

    sim.router.on_evict = on_evict  # type: ignore[method-assign]
    sim.run()
    assert seen and {w for _, w in seen} <= {0, 1}
    assert all(t >= 0.5 for t, _ in seen)


def test_a_load_report_counts_as_waiting_what_admission_left_not_what_arrived_during_the_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As the plugin's (SGLang's ``waiting_queue`` after the step: what arrived meanwhile is still in
    its socket). Counting the inbox made a worker with free slots look full (the router learned
    c_w = what it ran)."""
    at_report: list[tuple[int, int]] = []
    report = Simulator._report_load

    def spy(self: Simulator, worker: EngineWorker, just_finished: int) -> None:
        at_report.append((len(worker.waiting), len(worker.inbox)))
        report(self, worker, just_finished)

    monkeypatch.setattr(Simulator, "_report_load", spy)
    sim = Simulator(_spec("fair_cache_aware", "dlpm_light", 1), _tot(rate=3.0))
    heard = []
    on_load = sim.router.on_load
    sim.router.on_load = lambda w, load: (heard.append(load), on_load(w, load))  # type: ignore[method-assign]
    sim.run()
    assert len(heard) == len(at_report) > 0
    assert any(inbox for _, inbox in at_report)  # the precondition: requests arrived during steps
    assert [load.waiting for load in heard] == [waiting for waiting, _ in at_report]
