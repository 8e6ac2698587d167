"""The simulator's speed internals keep what they replace: packed eviction paths, the collector."""

from __future__ import annotations

import gc

from sglang_fair.core.global_tree import pack_tokens, unpack_tokens
from sglang_fair.core.radix_cache import LocalRadixCache
from sglang_fair.sim.simulator import long_run_collector


def test_evicted_paths_are_the_packed_tokens_after_splits() -> None:
    cache = LocalRadixCache(capacity=100)
    cache.insert([5, 6, 7, 8])
    cache.insert([5, 6, 9])  # splits [5, 6, 7, 8] after two tokens
    cache.insert([5, 1])
    evicted = cache.evict(100)
    assert sorted((e.tokens, e.start) for e in evicted) == [
        ((5,), 0), ((5, 1), 1), ((5, 6), 1), ((5, 6, 7, 8), 2), ((5, 6, 9), 2)]
    assert all(e.packed == pack_tokens(list(e.tokens)) for e in evicted)
    assert unpack_tokens(pack_tokens([0, 1, 2**32 - 1])) == (0, 1, 2**32 - 1)


def test_long_run_collector_restores_the_collector() -> None:
    before, was_frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        gc.unfreeze()  # the suite may have frozen objects before (SGLang does): start from none
        with long_run_collector(young=123_456):
            assert gc.get_threshold()[0] == max(before[0], 123_456)
            assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() == 0
        gc.freeze()  # a caller that froze objects itself keeps them frozen
        frozen = gc.get_freeze_count()
        with long_run_collector(young=123_456):
            pass
        assert gc.get_freeze_count() >= frozen > 0
    finally:
        gc.set_threshold(*before)
        if not was_frozen:
            gc.unfreeze()
