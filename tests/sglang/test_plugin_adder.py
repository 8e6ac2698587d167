"""The fair adder with a fake scheduler: SGLang's prefill loop asks it once, the policy decides.

The base adder stands in for SGLang's ``PrefillAdder`` (a token budget, a ``can_run_list``), the
scheduler for ``Scheduler`` (waiting queue, tree cache, running-request limit); the loop below does
what ``Scheduler._get_new_batch_prefill_raw`` does: ``add_one_req`` per waiting request until one
does not return CONTINUE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")

from sglang.srt.managers.schedule_policy import AddReqResult

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.sglang_plugin.adder import fair_adder_class
from sglang_fair.sglang_plugin.state import FairState

pytestmark = pytest.mark.sglang


@dataclass(eq=False)
class Req:
    rid: str
    routing_key: str
    origin_input_ids: list[int]
    prefix_len: int = 0
    output_ids: list[int] = field(default_factory=list)
    kv: Any = field(default_factory=lambda: type("KV", (), {"holds_kv": False})())
    done: bool = False

    def init_next_round_input(self, tree_cache: dict[str, int]) -> None:
        self.prefix_len = tree_cache.get(self.routing_key, 0)  # the radix match: cached per client

    def finished(self) -> bool:
        return self.done


@dataclass
class Batch:
    reqs: list[Req] = field(default_factory=list)
    batch_is_full: bool = False

    def is_empty(self) -> bool:
        return not self.reqs


class BaseAdder:
    """SGLang's adder reduced to its contract: a token budget over the extend lengths."""

    def __init__(self, tokens: int) -> None:
        self.rem_tokens = tokens
        self.can_run_list: list[Req] = []
        self.running_batch = Batch()

    def budget_state(self) -> AddReqResult:
        return AddReqResult.NO_TOKEN if self.rem_tokens <= 0 else AddReqResult.CONTINUE

    def add_one_req(self, req: Req, has_chunked_req: bool, truncation_align_size: Any) -> AddReqResult:
        need = len(req.origin_input_ids) - req.prefix_len
        if need > self.rem_tokens:
            return AddReqResult.NO_TOKEN
        self.rem_tokens -= need
        self.can_run_list.append(req)
        return AddReqResult.CONTINUE


@dataclass
class Scheduler:
    waiting_queue: list[Req]
    tree_cache: dict[str, int]
    slots: int = 100

    def get_num_allocatable_reqs(self, running: int, _x: Any, running_batch: Any, num_held_rows: int) -> int:
        return self.slots


def prefill_step(scheduler: Scheduler, state: FairState, tokens: int) -> tuple[BaseAdder, int]:
    """One scheduler step: the hooked ``calc_priority`` matches the queue, then
    ``_get_new_batch_prefill_raw`` asks the adder per request until one is not CONTINUE. Returns
    the adder and how many times it was asked."""
    for req in scheduler.waiting_queue:
        req.init_next_round_input(scheduler.tree_cache)
    state.reconcile(scheduler.waiting_queue)
    adder = fair_adder_class(BaseAdder, scheduler, state)(tokens)
    asked = 0
    for req in scheduler.waiting_queue:
        asked += 1
        if adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None) != AddReqResult.CONTINUE:
            break
    return adder, asked


def flood() -> Scheduler:
    """A heavy client's cached-prefix requests (extend 10 each) queued before a light client's
    uncached 40-token request."""
    heavy = [Req(f"h{i}", "heavy", list(range(110))) for i in range(6)]
    return Scheduler([*heavy, Req("l0", "light", list(range(40)))], {"heavy": 100})


def state_for(policy: str, quantum: float = 25.0) -> FairState:
    return FairState(make_admission_policy(AdmissionConfig(policy, quantum=quantum)))


@pytest.mark.parametrize(("policy", "admitted"), [
    ("lpm", ["h0", "h1", "h2", "h3", "h4", "h5"]),  # cached prefixes first; the light request misses
    ("dlpm", ["h0", "h1", "h2", "l0"]),  # heavy's 25 of credit lasts three; light's own credit admits it
])
def test_the_policy_decides_in_one_call_and_the_loop_stops(policy: str, admitted: list[str]) -> None:
    scheduler = flood()
    state = state_for(policy)
    adder, asked = prefill_step(scheduler, state, tokens=70)
    assert asked == 1  # the first call ran the whole selection and answered OTHER
    assert [r.rid for r in adder.can_run_list] == admitted
    assert set(state.running) == set(admitted) and len(state.waiting) == 7 - len(admitted)


def test_the_running_request_limit_fills_the_batch() -> None:
    scheduler = flood()
    scheduler.slots = 2
    adder, _ = prefill_step(scheduler, state_for("fcfs"), tokens=1000)
    assert len(adder.can_run_list) == 2 and adder.running_batch.batch_is_full


def test_out_of_tokens_stops_admission_and_marks_the_batch_full() -> None:
    scheduler = flood()
    adder, _ = prefill_step(scheduler, state_for("fcfs"), tokens=25)  # h0 (10), h1 (10), then h2 misses
    assert [r.rid for r in adder.can_run_list] == ["h0", "h1"]
    assert adder.running_batch.batch_is_full


@pytest.mark.parametrize("reserve_s", [30.0, 0.0], ids=["reserve", "negative-control-no-reserve"])
def test_the_band_reserve_reads_the_schedulers_free_rows(reserve_s: float) -> None:
    """The reserve (``admission/headroom.py``) in the scheduler: the worker's slots are the running
    requests plus the rows ``get_num_allocatable_reqs`` leaves. Two chats (band 0) and a batch flood
    (band 2) on four slots; once the chats finish, their two slots stay free for the next chat until the
    band has been quiet for the window."""
    now = [0.0]
    config = AdmissionConfig("dlpm_light", quantum=1000.0, client_bands={"chat": 0, "etl": 2},
                             band_reserve_s=reserve_s, band_reserve_floor=0, band_prefill_share=1.0)
    state = FairState(make_admission_policy(config), clock=lambda: now[0])
    chats = [Req(f"c{i}", "chat", list(range(20))) for i in range(3)]
    etl = [Req(f"e{i}", "etl", list(range(100 + i, 120 + i))) for i in range(8)]
    scheduler = Scheduler([*chats[:2], *etl], {}, slots=4)

    def step(free: int) -> list[str]:
        scheduler.slots = free
        adder, _ = prefill_step(scheduler, state, tokens=10_000)
        scheduler.waiting_queue = [r for r in scheduler.waiting_queue if r not in adder.can_run_list]
        return [r.rid for r in adder.can_run_list]

    assert step(4) == ["c0", "c1", "e0", "e1"]
    now[0] = 1.0
    for chat in chats[:2]:
        chat.done = True
    state.after_step()  # the chats finish; two etl run
    if reserve_s:
        assert step(2) == []  # the two free rows are held for the chat band
        scheduler.waiting_queue.insert(0, chats[2])
        assert step(2) == ["c2"]  # a chat that arrives gets one at once
        now[0] = 1.0 + reserve_s + 1  # (c2 still runs; it finishes)
        chats[2].done = True
        state.after_step()
        now[0] += reserve_s + 1  # the band has been quiet for the window: the reserve is released
        assert step(2) == ["e2", "e3"]
    else:
        assert step(2) == ["e2", "e3"]  # without it, the batch band takes them


@pytest.mark.parametrize("share", [0.1, 1.0], ids=["paced", "negative-control-no-pace"])
def test_the_prefill_pace_reads_the_schedulers_clock(share: float) -> None:
    """The prefill pace (``admission/pace.py``) in the scheduler: while a chat (band 0) runs, a step admits
    one batch request, and after that prefill step (1 s from the admission to ``after_step``, half of it
    the batch request's: 20 of its 40 extend tokens) the batch band waits 0.5 x (1 - f) / f = 4.5 s of
    the clock before the next."""
    now = [0.0]
    config = AdmissionConfig("dlpm_light", quantum=1000.0, client_bands={"chat": 0, "etl": 2},
                             band_prefill_share=share)
    state = FairState(make_admission_policy(config), clock=lambda: now[0])
    chat = Req("c0", "chat", list(range(20)))
    etl = [Req(f"e{i}", "etl", list(range(100 + i, 120 + i))) for i in range(8)]
    scheduler = Scheduler([chat, *etl], {}, slots=16)

    def step() -> list[str]:
        adder, _ = prefill_step(scheduler, state, tokens=10_000)
        scheduler.waiting_queue = [r for r in scheduler.waiting_queue if r not in adder.can_run_list]
        return [r.rid for r in adder.can_run_list]

    first = step()
    now[0] = 1.0
    state.after_step()  # the prefill step took 1 s
    if share < 1:
        assert first == ["c0", "e0"]  # the chat, and one batch request with it
        now[0] = 5.0
        assert step() == []  # 4 s later the batch prefill's debt is not yet paid back
        now[0] = 10.5
        assert step() == ["e1"]
    else:
        assert first == ["c0", *(r.rid for r in etl)]
