"""[1] Fig. 12's mixed workload: two multi-turn clients, a ToT client and a judge client."""

from __future__ import annotations

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.workloads import WorkloadConfig, make_workload


def test_mix_gives_each_client_its_kind_at_one_rate() -> None:
    progs = make_workload(WorkloadConfig(workload="mix", clients=4, rate=0.5, duration=200, seed=3))
    kinds = {c: {p.kind for p in progs if p.client == c} for c in ("c0", "c1", "c2", "c3")}
    assert kinds == {"c0": {"multiturn"}, "c1": {"multiturn"}, "c2": {"tot"}, "c3": {"judge"}}
    calls = {c: {len(p.calls) for p in progs if p.client == c} for c in kinds}
    # 2 turns; a B = 2 tree; 2 dimensions + the merge
    assert calls["c0"] == {2} and calls["c2"] == {30} and calls["c3"] == {3}
    for c in kinds:  # same program rate for everyone: 100 expected in 200 s
        assert 60 <= sum(p.client == c for p in progs) <= 140
    assert not any(p.misbehaving for p in progs)
    again = make_workload(WorkloadConfig(workload="mix", clients=4, rate=0.5, duration=200, seed=3))
    def shape(ps: list) -> list:
        return [(p.client, p.arrival, len(p.calls)) for p in ps]

    assert shape(again) == shape(progs)


def test_mix_refuses_a_scenario() -> None:
    with pytest.raises(ConfigError, match="mix"):
        WorkloadConfig(workload="mix", scenario="s1")
