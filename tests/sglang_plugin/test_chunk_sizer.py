"""FairBatching's time-budget chunk sizing in the plugin, with a fake scheduler (no server).

The base adder stands in for SGLang's ``PrefillAdder`` (its ``rem_chunk_tokens`` chunks the admitted
prompts, as SGLang's chunked prefill does), the scheduler for ``Scheduler`` (running batch, chunked
request, mixed-chunk switch, the adder class hook), a batch for ``ScheduleBatch`` (``launch_ts`` set
by ``run_batch``). A fake clock drives time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from sglang_fair.batching import BatchingConfig
from sglang_fair.core.errors import ConfigError
from sglang_fair.sglang_plugin import scheduler_hooks
from sglang_fair.sglang_plugin.chunk_sizer import ChunkSizer, sized_adder_class
from sglang_fair.sglang_plugin.config import ENV_CONFIG, build_config, config_from_env

# prior: 10 ms a step + 0.1 ms a new token, no KV term: a chunk of n tokens takes 0.01 + 1e-4 n s
PRIOR = {"step_fixed": 0.01, "step_per_token": 1e-4, "step_per_context": 0.0}
CONFIG = BatchingConfig("fairbatching", tpot=0.05, time_safety=1.0, **PRIOR)  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@dataclass(eq=False)
class Req:
    rid: str
    origin_input_ids: list[int]
    output_ids: list[int] = field(default_factory=list)
    routing_key: str = "c"
    prefix_len: int = 0
    done: bool = False

    def finished(self) -> bool:
        return self.done


@dataclass
class Mode:
    extend: bool

    def is_extend(self) -> bool:
        return self.extend

    def is_decode(self) -> bool:
        return not self.extend


@dataclass
class Batch:
    reqs: list[Req] = field(default_factory=list)
    launch_ts: float | None = None
    forward_mode: Mode = field(default_factory=lambda: Mode(False))
    extend_num_tokens: int | None = None


class BaseAdder:
    """SGLang's adder reduced to its chunking: admitted prompts fill ``rem_chunk_tokens``."""

    def __init__(self, rem_chunk_tokens: int | None, running_batch: Batch) -> None:
        self.rem_chunk_tokens = rem_chunk_tokens
        self.running_batch = running_batch
        self.chunks: list[tuple[str, int]] = []

    def add(self, req: Req) -> None:
        need = len(req.origin_input_ids) - req.prefix_len
        take = need if self.rem_chunk_tokens is None else min(need, self.rem_chunk_tokens)
        self.chunks.append((req.rid, take))
        if self.rem_chunk_tokens is not None:
            self.rem_chunk_tokens -= take


@dataclass
class Policy:
    """SchedulePolicy without a fair admission state (``--schedule-policy fcfs``)."""


@dataclass
class Scheduler:
    running_batch: Batch = field(default_factory=Batch)
    chunked_req: Req | None = None
    is_mixed_chunk: bool = False
    prefill_decode_interval: int = 1
    policy: Policy = field(default_factory=Policy)
    waiting_queue: list[Req] = field(default_factory=list)


def budget_with(clock: Clock, reqs: list[Req], first_ago: float,
                config: BatchingConfig = CONFIG) -> ChunkSizer:
    """A budget whose running ``reqs`` had their first token ``first_ago`` s ago."""
    budget = ChunkSizer(config, clock)
    budget.first_token = {r.rid: clock.t - first_ago for r in reqs}
    return budget


def test_no_running_decodes_leaves_sglangs_chunk_size() -> None:
    clock = Clock()
    budget = ChunkSizer(CONFIG, clock)
    scheduler = Scheduler()
    adder = sized_adder_class(BaseAdder, scheduler, budget)(8192, scheduler.running_batch)
    assert adder.rem_chunk_tokens == 8192  # no decode is waiting: no time limit


@pytest.mark.parametrize(("first_ago", "chunk"), [
    (0.30, 1900),  # next token due at first + 10 * 0.05 = 0.2 s from now: T = 0.2 s, (0.2 - 0.01) / 1e-4
    (0.40, 900),   # due in 0.1 s
    (0.48, 400),   # due in 0.02 s: T is held at the TPOT target, 0.05 s
    (0.90, 400),   # overdue: still one TPOT (the decodes run in the next step either way)
])
def test_the_chunk_follows_the_time_budget(first_ago: float, chunk: int) -> None:
    clock = Clock()
    reqs = [Req(f"r{i}", list(range(100)), list(range(10))) for i in range(2)]
    budget = budget_with(clock, reqs, first_ago)
    scheduler = Scheduler(running_batch=Batch(reqs))
    adder = sized_adder_class(BaseAdder, scheduler, budget)(8192, scheduler.running_batch)
    assert adder.rem_chunk_tokens == chunk
    long_prompt = Req("p", list(range(5000)))
    adder.add(long_prompt)
    assert adder.chunks == [("p", chunk)]  # SGLang's chunking now cuts at the time budget


def test_sglangs_own_smaller_size_and_disabled_chunking_are_kept() -> None:
    clock = Clock()
    reqs = [Req("r0", list(range(100)), list(range(10)))]
    cls = sized_adder_class(BaseAdder, Scheduler(running_batch=Batch(reqs)), budget_with(clock, reqs, 0.3))
    assert cls(512, Batch(reqs)).rem_chunk_tokens == 512
    assert cls(None, Batch(reqs)).rem_chunk_tokens is None


def test_mixed_chunk_counts_the_decodes_riding_in_the_step() -> None:
    clock = Clock()
    config = BatchingConfig("fairbatching", tpot=0.05, time_safety=1.0, step_fixed=0.01,
                            step_per_token=1e-4, step_per_context=1e-6)
    reqs = [Req(f"r{i}", list(range(990)), list(range(10))) for i in range(4)]  # 1001 KV tokens each
    budget = budget_with(clock, reqs, 0.48, config)  # T = 0.05 s
    alone = budget.chunk_tokens(reqs, None, mixed=False)
    riding = budget.chunk_tokens(reqs, None, mixed=True)
    # alone: 0.05 - 0.01 = 0.04 s for n (1e-4 + 1e-6) s; riding: minus 4 * 1001 * 1e-6 + 4 * 1e-4 s
    assert alone == int(0.04 / 1.01e-4)
    assert riding == int((0.04 - 4 * 1001e-6 - 4e-4) / 1.01e-4)
    chunked = Req("p", list(range(20000)), prefix_len=10000)  # SGLang's chunked request reads its prefix
    assert budget.chunk_tokens(reqs, chunked, mixed=False) == int((0.04 - 0.01) / 1.01e-4)


def run_step(budget: ChunkSizer, clock: Clock, batch: Batch, seconds: float) -> None:
    batch.launch_ts = clock.t
    clock.t += seconds
    budget.observe(batch, extend=batch.forward_mode.extend)


def test_the_step_model_learns_measured_step_times() -> None:
    """The engine is twice as slow as the prior: after measured steps the chunk halves (about)."""
    clock = Clock()
    reqs = [Req(f"r{i}", list(range(100)), list(range(10))) for i in range(2)]
    budget = budget_with(clock, reqs, 0.0)
    budget.first_token = {}
    for i, n in enumerate([64, 128, 256, 512, 1024] * 8):
        prefill = Batch([Req(f"p{i}", list(range(n)))], forward_mode=Mode(True), extend_num_tokens=n)
        run_step(budget, clock, prefill, 0.02 + 2e-4 * n)
        run_step(budget, clock, Batch(reqs), 0.02 + 2e-4 * len(reqs))
    assert budget.steps == 80
    fixed, _, per_token = budget.policy.model.coefficients
    assert fixed == pytest.approx(0.02, rel=0.1) and per_token == pytest.approx(2e-4, rel=0.1)
    budget.first_token = {r.rid: clock.t - 0.3 for r in reqs}  # T = 0.2 s
    assert budget.chunk_tokens(reqs, None, mixed=False) == pytest.approx((0.2 - 0.02) / 2e-4, rel=0.1)


def test_negative_control_steps_as_the_prior_says_leave_the_chunk() -> None:
    clock = Clock()
    reqs = [Req(f"r{i}", list(range(100)), list(range(10))) for i in range(2)]
    budget = budget_with(clock, reqs, 0.0)
    for i, n in enumerate([64, 256, 1024] * 10):
        run_step(budget, clock, Batch([Req(f"p{i}", list(range(n)))], forward_mode=Mode(True),
                                      extend_num_tokens=n), 0.01 + 1e-4 * n)
    budget.first_token = {r.rid: clock.t - 0.3 for r in reqs}
    assert budget.chunk_tokens(reqs, None, mixed=False) == pytest.approx(1900, abs=5)


def test_finished_requests_leave_and_prune_bounds_memory() -> None:
    clock = Clock()
    a, b = Req("a", [1, 2], [7]), Req("b", [1, 2], [7])
    budget = ChunkSizer(CONFIG, clock)
    run_step(budget, clock, Batch([a, b], forward_mode=Mode(True), extend_num_tokens=4), 0.01)
    assert set(budget.first_token) == {"a", "b"}
    a.done = True
    run_step(budget, clock, Batch([a, b]), 0.01)
    assert set(budget.first_token) == {"b"}
    budget.prune([])
    assert budget.first_token == {}
    assert budget.chunk_tokens([b], None, mixed=False) is None  # b is unknown now: no decode to protect


@pytest.fixture
def fairbatching_env(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {"batch_policy": "fairbatching", "batch_tpot": 0.05, "batch_time_safety": 1.0,
              "batch_step_fixed": 0.01, "batch_step_per_token": 1e-4}
    monkeypatch.setenv(ENV_CONFIG, build_config(values).to_env())


@pytest.mark.usefixtures("fairbatching_env")
def test_the_scheduler_hooks_size_the_adder_and_feed_the_model() -> None:
    scheduler = Scheduler()
    cls = scheduler_hooks.prefill_adder_class(lambda _s: BaseAdder, scheduler)
    budget = scheduler_hooks.chunk_sizer_of(scheduler)
    assert isinstance(budget, ChunkSizer) and issubclass(cls, BaseAdder) and cls is not BaseAdder
    clock = Clock()
    budget.clock = clock
    reqs = [Req("r0", list(range(100)), [5])]
    batch = Batch(reqs, launch_ts=clock.t, forward_mode=Mode(True), extend_num_tokens=100)
    clock.t += 0.03
    scheduler_hooks.process_batch_result(None, scheduler, batch, None)
    assert budget.steps == 1 and budget.first_token == {"r0": clock.t}
    scheduler.running_batch = Batch(reqs)
    reqs[0].output_ids = list(range(10))
    clock.t += 0.3  # the next token is due in 0.2 s
    assert cls(8192, scheduler.running_batch).rem_chunk_tokens < 8192


@pytest.mark.usefixtures("fairbatching_env")
def test_without_interleaving_sglangs_chunk_size_stands() -> None:
    """Without mixed chunk or a prefill-decode interval SGLang runs a prompt's chunks back to back
    (``get_next_batch_to_run``: prefill first), so smaller chunks would only add steps."""
    scheduler = Scheduler(prefill_decode_interval=0)
    assert scheduler_hooks.prefill_adder_class(lambda _s: BaseAdder, scheduler) is BaseAdder
    assert scheduler_hooks.chunk_sizer_of(scheduler) is None
    mixed = Scheduler(prefill_decode_interval=0, is_mixed_chunk=True)
    assert scheduler_hooks.prefill_adder_class(lambda _s: BaseAdder, mixed) is not BaseAdder


def test_without_the_flag_the_adder_is_sglangs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_CONFIG, raising=False)
    scheduler = Scheduler()
    assert scheduler_hooks.prefill_adder_class(lambda _s: BaseAdder, scheduler) is BaseAdder
    batch = Batch([Req("r0", [1], [2])], launch_ts=0.0)
    scheduler_hooks.process_batch_result(None, scheduler, batch, None)  # nothing to learn, no error
    assert scheduler_hooks.chunk_sizer_of(scheduler) is None


def test_config_flags_round_trip_and_refuse_what_sglang_cannot_run() -> None:
    config = build_config({"batch_policy": "fairbatching", "batch_tpot": 0.1, "batch_slo_classes": "p=1/0.02",
                           "batch_client_classes": "alice=p"})
    env = json.loads(config.to_env())
    assert env["batch_policy"] == "fairbatching" and "batch_offset" not in env
    assert config_from_env({ENV_CONFIG: config.to_env()}).batching == config.batching
    for policy in ("sarathi", "slai"):
        with pytest.raises(ConfigError, match="SGLang workers run sglang or fairbatching"):
            build_config({"batch_policy": policy})


def test_per_client_slo_classes_reach_the_decodes() -> None:
    clock = Clock()
    config = BatchingConfig("fairbatching", tpot=0.5, time_safety=1.0, slo_classes="paying=1/0.02",
                            client_classes="alice=paying", **PRIOR)  # type: ignore[arg-type]
    free = Req("f", list(range(10)), list(range(10)), routing_key="bob")
    paying = Req("p", list(range(10)), list(range(10)), routing_key="alice")
    only_free = budget_with(clock, [free], 0.2, config)
    both = budget_with(clock, [free, paying], 0.2, config)
    assert only_free.chunk_tokens([free], None, mixed=False) == 8192  # bob's next token is due in 4.8 s
    assert both.chunk_tokens([free, paying], None, mixed=False) == 100  # alice's is due now: T = 0.02 s
