"""The engine worker's modes, on hand-built queues: SGLang's stop at the first request that does not
fit versus the papers' skip, mixed prefill+decode steps, and the lock-step driver built on them."""

from __future__ import annotations

from dataclasses import replace

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.lockstep import Lockstep, LockstepConfig, NoTime
from sglang_fair.sim.request import EngineRequest
from sglang_fair.sim.worker import EngineWorker

BASE = EngineConfig(kv_tokens=100, chunk_size=1000, max_running=8, ignore_eos=True, retry_every=1,
                    max_decode_steps=1)


def worker(config: EngineConfig, policy: str = "fcfs") -> EngineWorker:
    return EngineWorker(0, make_admission_policy(AdmissionConfig(policy)), config, NoTime(), 100)


def request(rid: int, prompt: int, output: int, client: str = "a") -> EngineRequest:
    return EngineRequest(rid, client, [rid * 1000 + i for i in range(prompt)], output, 0.0,
                         output_ids=[7] * output)


def step(w: EngineWorker) -> list[int]:
    """Run one step; return the rids the step prefilled."""
    plan = w.start_step()
    assert plan is not None
    rids = [r.rid for r, _ in plan.batch]
    w.complete_step()
    return rids


def test_admission_stops_at_the_first_misfit_as_sglang_and_skips_it_in_the_papers_model() -> None:
    admitted = {}
    for skip in (False, True):
        w = worker(replace(BASE, skip_misfits=skip))
        w.enqueue(request(0, 40, 20))  # runs: 60 of the 100 tokens committed
        assert step(w) == [0]
        w.enqueue(request(1, 40, 20))  # 60 more: does not fit
        w.enqueue(request(2, 10, 10))  # 20: fits
        admitted[skip] = step(w)
    assert admitted == {False: [], True: [2]}


def test_mixed_steps_decode_the_running_batch_while_prefilling() -> None:
    outputs = {}
    for mixed in (False, True):
        w = worker(replace(BASE, mixed_chunk=mixed))
        w.enqueue(request(0, 10, 5))
        step(w)  # prefill of 0: its first token
        w.enqueue(request(1, 10, 5))
        assert step(w) == [1]  # a prefill step in both modes
        w.batch.sync_all()  # decode progress is applied lazily (the batch's decode clock)
        outputs[mixed] = (w.running[0].rid, w.running[0].generated)
    assert outputs == {False: (0, 1), True: (0, 2)}  # only the mixed step also decoded request 0


def test_lockstep_gives_every_running_request_one_token_per_step() -> None:
    cluster = Lockstep(LockstepConfig(capacity=200, max_running=4), AdmissionConfig("fcfs"),
                       RouterConfig("round_robin"))
    reqs = [request(0, 10, 3), request(1, 10, 3)]
    reqs[1].arrival = 1
    cluster.run(reqs)
    times = {rid: (r.admitted, r.first_token, r.finished) for rid, r in cluster.records.items()}
    assert times == {0: (0, 0, 2), 1: (1, 1, 3)}
    assert cluster.ledger.tokens["a"].output_tokens == 6 and cluster.step == 4
