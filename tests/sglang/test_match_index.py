"""Incremental matching of the waiting queue (sglang_plugin/match_index.py) against SGLang's own
radix cache: after random inserts, evictions, arrivals and admissions, every waiting request's
cached prefix and the LPM order equal what matching the whole queue again gives."""

from __future__ import annotations

import os
import random
from array import array
from typing import Any

import pytest

pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.lpm import lpm_order
from sglang_fair.sglang_plugin import scheduler_hooks
from sglang_fair.sglang_plugin.match_index import unified_radix_cache
from sglang_fair.sglang_plugin.state import FairState

pytestmark = pytest.mark.sglang


@pytest.fixture(scope="module", autouse=True)
def server_args() -> None:
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    set_global_server_args_for_scheduler(ServerArgs(model_path="dummy", device="cpu"))


def hooked_tree(kv_tokens: int, page_size: int = 1, notify: bool = True) -> tuple[Any, Any]:
    """The cache with the plugin's AFTER hooks on its instance methods (load_plugins does it on the class)."""
    tree, allocator = unified_radix_cache(kv_tokens, page_size)
    if notify:
        for name, hook in (("insert", scheduler_hooks.tree_insert),
                           ("_evict_device_leaf", scheduler_hooks.tree_node_gone),
                           ("_demote", scheduler_hooks.tree_node_gone),
                           ("reset", scheduler_hooks.tree_changed)):
            original = getattr(tree, name)

            def wrapped(*args: Any, _o: Any = original, _h: Any = hook, **kwargs: Any) -> Any:
                result = _o(*args, **kwargs)
                _h(result, tree, *args, **kwargs)
                return result

            setattr(tree, name, wrapped)
    return tree, allocator


def make_req(rid: str, tokens: list[int]) -> Any:
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    return Req(rid, "", array("q", tokens), SamplingParams(max_new_tokens=4), routing_key=f"c{len(rid) % 3}")


def insert(tree: Any, allocator: Any, tokens: list[int]) -> None:
    from sglang.srt.mem_cache.base_prefix_cache import InsertParams
    from sglang.srt.mem_cache.radix_cache import RadixKey

    value = allocator.alloc(len(tokens))
    if value is None:
        return
    tree.insert(InsertParams(key=RadixKey(array("q", tokens)), value=value))


class Rig:
    def __init__(self, seed: int, page_size: int = 1, notify: bool = True) -> None:
        self.rng = random.Random(seed)
        self.tree, self.allocator = hooked_tree(3000, page_size, notify)
        self.state = FairState(make_admission_policy(AdmissionConfig("dlpm")))
        self.prefixes = [[1000 * p + i for i in range(self.rng.randrange(20, 200))] for p in range(6)]
        self.n = 0

    def tokens(self) -> list[int]:
        prefix = self.rng.choice(self.prefixes)
        cut = self.rng.randrange(len(prefix) + 1)
        return prefix[:cut] + [self.rng.randrange(50_000, 60_000) for _ in range(self.rng.randrange(1, 40))]

    def arrive(self) -> None:
        self.n += 1
        self.state.arrive(make_req(f"r{self.n}", self.tokens()))

    def step(self) -> None:
        op = self.rng.random()
        if op < 0.35:
            self.arrive()
        elif op < 0.6:  # a finished request publishes its sequence (sometimes a waiting one's prefix)
            waiting = list(self.state.waiting.values())
            if waiting and self.rng.random() < 0.5:
                ids = list(self.rng.choice(waiting).req.origin_input_ids)
                insert(self.tree, self.allocator, ids[: self.rng.randrange(1, len(ids) + 1)])
            else:
                insert(self.tree, self.allocator, self.tokens())
        elif op < 0.8:
            from sglang.srt.mem_cache.base_prefix_cache import EvictParams

            self.tree.evict(EvictParams(num_tokens=self.rng.randrange(1, 300)))
        elif self.state.waiting:  # admitted or aborted: leaves the queue
            rid = self.rng.choice(list(self.state.waiting))
            queue = [ad.req for r, ad in self.state.waiting.items() if r != rid]
            self.state.reconcile(queue)

    def check(self) -> int:
        from sglang.srt.mem_cache.common import match_kv_cache

        self.state.match(self.tree)
        cached = {rid: ad.cached_len for rid, ad in self.state.waiting.items()}
        order = [ad.rid for ad in self.state.queue.ordered()]
        wrong = 0
        for ad in self.state.waiting.values():
            match_kv_cache(ad.req, self.tree)  # the full re-match SGLang would do
            wrong += ad.cached_len != cached[ad.rid]
        return wrong + (order != [ad.rid for ad in lpm_order(list(self.state.waiting.values()))])


@pytest.mark.parametrize(("seed", "page_size"), [(0, 1), (1, 1), (2, 1), (3, 4)])
def test_incremental_matches_equal_full_rematch_under_random_changes(seed: int, page_size: int) -> None:
    rig = Rig(seed, page_size)
    for _ in range(40):
        rig.arrive()
    assert rig.check() == 0
    full = rig.state.index.matches if rig.state.index else 0
    for _ in range(600):
        rig.step()
        assert rig.check() == 0
    assert rig.state.index is not None
    assert rig.state.index.matches - full < 600 * len(rig.state.waiting)  # far fewer than every step


def test_without_the_tree_notifications_the_check_finds_stale_matches() -> None:
    rig = Rig(5, notify=False)
    for _ in range(40):
        rig.arrive()
    rig.check()
    wrong = 0
    for _ in range(300):
        rig.step()
        wrong += rig.check()
    assert wrong > 0


def test_sync_sees_an_abort_at_once_and_an_unhooked_addition_within_the_full_check_period() -> None:
    from sglang_fair.sglang_plugin.state import FULL_CHECK_EVERY

    state = FairState(make_admission_policy(AdmissionConfig("dlpm")))
    queue = [make_req(f"q{i}", [1, 2, 3, i]) for i in range(5)]
    for req in queue:
        state.arrive(req)
    state.sync(queue)
    queue.pop(2)  # aborted while waiting: SGLang pops it, no hook tells the state
    state.sync(queue)
    assert set(state.waiting) == {r.rid for r in queue}
    queue[0] = make_req("stranger", [9, 9])  # swapped in without the hook: same length
    steps = 0
    while "stranger" not in state.waiting:
        state.sync(queue)
        steps += 1
    assert steps <= FULL_CHECK_EVERY and set(state.waiting) == {r.rid for r in queue}


def test_other_caches_are_matched_in_full_every_step() -> None:
    import torch
    from sglang.srt.mem_cache.base_prefix_cache import InsertParams
    from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

    from sglang_fair.sglang_plugin.match_index import supported

    tree = RadixCache.create_simulated()
    assert not supported(tree) and supported(unified_radix_cache(100)[0])
    state = FairState(make_admission_policy(AdmissionConfig("dlpm")))
    a, b = make_req("a", [1, 2, 3, 4]), make_req("b", [7, 8, 9])
    state.arrive(a)
    state.arrive(b)
    state.match(tree)
    assert state.index is None and [ad.rid for ad in state.queue.ordered()] == ["a", "b"]
    tree.insert(InsertParams(key=RadixKey(array("q", [7, 8])), value=torch.zeros(2, dtype=torch.int64)))
    state.match(tree)
    assert state.waiting["b"].cached_len == 2 and [ad.rid for ad in state.queue.ordered()] == ["b", "a"]
