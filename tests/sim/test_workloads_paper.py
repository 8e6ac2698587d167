"""The paper's workloads ([1] Tables 2-3, Fig. 8) against hand-checked counts and the data's lengths."""

from __future__ import annotations

import random
import statistics
from collections import Counter

import pytest

from sglang_fair.workloads import ProgramRun, WorkloadConfig, judge, make_workload, qa
from sglang_fair.workloads.arena import HEAVY_FACTOR, load_trace_rows
from sglang_fair.workloads.tokens import make_tokenizer, seeded_rng

A100_POOL = 391_693  # KV tokens of one A100-80GB + Llama-3.1-8B worker (docs/design/simulator.md)


def _levels(program) -> list[int]:
    """Calls per level of a program's DAG (a call's level = 1 + its parent's)."""
    level: dict[int, int] = {}
    for i, call in enumerate(program.calls):
        level[i] = 1 + max((level[d] for d in call.deps), default=0)
    return [n for _, n in sorted(Counter(level.values()).items())]


@pytest.mark.parametrize(("branches", "levels"),
                         [(2, [2, 4, 8, 16]), (3, [3, 9, 27, 81]), (4, [4, 16, 64, 256])])
def test_tot_forks_at_the_root_like_sglangs_benchmark(branches: int, levels: list[int]) -> None:
    cfg = WorkloadConfig(workload="tot", clients=1, rate=0.5, duration=4, branches=branches,
                         synthetic_data=True)
    p = make_workload(cfg)[0]
    assert _levels(p) == levels and len(p.calls) == sum(levels)  # 30 / 120 / 340 ([1] Table 3)
    run = ProgramRun(p)
    roots = [i for i, c in enumerate(p.calls) if not c.deps]
    assert len(roots) == branches and len({run.prompt(i) for i in roots}) == 1


def test_tot_s1_counts_and_level_instructions_differ() -> None:
    cfg = WorkloadConfig(workload="tot", scenario="s1", clients=3, rate=0.3, duration=20, synthetic_data=True)
    sizes = {(p.client, len(p.calls)) for p in make_workload(cfg)}
    assert sizes == {("c0", 340), ("c1", 30), ("c2", 30)}
    p = make_workload(cfg)[-1]
    run = ProgramRun(p)
    leaf, mid = run.prompt(len(p.calls) - 1), run.prompt(2)
    assert leaf[-5:] != mid[-5:]  # each level appends its own instruction


def test_judge_prefix_and_output_lengths_match_table_2() -> None:
    cfg = WorkloadConfig(workload="judge", clients=4, rate=1.0, duration=30, synthetic_data=True)
    programs = make_workload(cfg)
    prompts = [len(ProgramRun(p).prompt(i)) for p in programs for i in range(len(p.calls))]
    outputs = [c.output_len for p in programs for c in p.calls]
    assert len(programs) > 80
    assert abs(statistics.mean(prompts) / 2701 - 1) < 0.10  # [1] Table 2: 2,701
    assert abs(statistics.mean(outputs) / 256 - 1) < 0.05  # [1] Table 2: 256
    s2 = WorkloadConfig(workload="judge", scenario="s2", clients=2, synthetic_data=True)
    tok = make_tokenizer(s2)
    bad, good = (judge.make_program(s2, 0, c, 0.0, tok, random.Random(7)) for c in ("c0", "c1"))
    assert len(ProgramRun(bad).prompt(0)) - len(ProgramRun(good).prompt(0)) == 600  # Table 3


def test_qa_clients_ask_about_their_own_documents_only() -> None:
    cfg = WorkloadConfig(workload="qa", clients=3, rate=2.0, duration=10, documents=12, synthetic_data=True)
    tok = make_tokenizer(cfg)
    docs = qa.make_documents(cfg, tok, seeded_rng("data", cfg.seed))
    heads = {d.header: k for k, d in enumerate(docs)}
    assert len(docs) == 12 and len(heads) == 12  # distinct headers: distinct prefixes
    seen: dict[str, set[int]] = {}
    for p in make_workload(cfg):
        k = heads[p.calls[0].parts[1]]  # type: ignore[index]
        seen.setdefault(p.client, set()).add(k)
    assert all(k % 3 == int(c[1:]) for c, ks in seen.items() for k in ks)
    assert all(len(ks) >= 3 for ks in seen.values())  # several documents each: reuse and switching


def test_qa_document_set_is_many_pools_with_loogle_lengths() -> None:
    cfg = WorkloadConfig(workload="qa", clients=4, rate=1.0, duration=10)
    tok = make_tokenizer(cfg)
    sources = qa.load_sources(cfg, tok, seeded_rng("data", cfg.seed))
    docs = qa.make_documents(cfg, tok, seeded_rng("data", cfg.seed))
    assert len(sources) == 9  # longdep and shortdep share one of their 10 documents
    total = sum(len(d) for d in docs)
    assert total > 5 * A100_POOL  # ~3.5M tokens: about 9 A100 pools
    sample_mean = statistics.mean(len(s.tokens) for s in sources)
    assert abs(statistics.mean(len(d.source.tokens) for d in docs) / sample_mean - 1) < 0.02
    assert min(len(s.tokens) for s in sources) > 10_000 and max(len(s.tokens) for s in sources) < 30_000
    outs = [p.calls[0].output_len for p in make_workload(cfg)]
    assert all(4 <= n <= 32 for n in outs) and 10 < statistics.mean(outs) < 30  # Table 2: 15


def _arena(**kw: object) -> list:
    args: dict = {"workload": "arena", "clients": 4, "duration": 600.0, "time_scale": 4.0, **kw}
    return make_workload(WorkloadConfig(**args))  # type: ignore[arg-type]


def test_arena_rates_follow_fig_8() -> None:
    programs = _arena(synthetic_data=True, duration=300.0, time_scale=2.0)
    half = 150.0
    first = Counter(p.client for p in programs if p.arrival < half)
    second = Counter(p.client for p in programs if p.arrival >= half)
    for c in ("c2", "c3"):
        assert first[c] / first["c0"] == pytest.approx(HEAVY_FACTOR, rel=0.3)
    assert second["c3"] / second["c0"] == pytest.approx(HEAVY_FACTOR, rel=0.3)
    assert second["c2"] / second["c0"] == pytest.approx(1.0, rel=0.3)  # c2 returns to normal midway
    assert {p.client for p in programs if p.misbehaving} == {"c2", "c3"}
    assert max(p.arrival for p in programs) > 0.98 * 300  # the trace is replayed: arrivals go on


def test_arena_conversations_are_two_turns_extending_each_other() -> None:
    p = _arena(synthetic_data=True, duration=20.0)[0]
    run = ProgramRun(p)
    assert len(p.calls) == 2 and p.calls[1].deps == (0,)
    first = run.prompt(0) + run.output(0)
    assert run.prompt(1)[: len(first)] == first
    a, b = _arena(synthetic_data=True, duration=60.0), _arena(synthetic_data=True, duration=60.0)
    assert [(q.client, q.arrival) for q in a] == [(q.client, q.arrival) for q in b]
    assert [(q.client, q.arrival) for q in a] != [(q.client, q.arrival) for q in _arena(synthetic_data=True,
                                                                                    duration=60.0, seed=1)]


def test_arena_uses_the_trace_times_and_lengths() -> None:
    cfg = WorkloadConfig(workload="arena", clients=4, duration=150.01, time_scale=4.0)
    times, lengths = load_trace_rows(cfg)
    assert len(times) == 1500 and times[0] == 0.0
    programs = make_workload(cfg)
    assert len(programs) == 1500  # 600 s of trace in 150 s at time_scale 4
    assert sorted(round(p.arrival * 4, 4) for p in programs) == [round(t, 4) for t in times]
    first_out = [p.calls[0].output_len for p in programs]
    assert statistics.mean(first_out) == pytest.approx(statistics.mean(o for _, o in lengths))  # 256
    assert statistics.mean(n for n, _ in lengths) == pytest.approx(136.3, abs=0.1)  # Table 2 says 56


def test_arena_config_errors() -> None:
    from sglang_fair.core.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 4 clients"):
        WorkloadConfig(workload="arena", clients=3)
    with pytest.raises(ConfigError, match="own misbehaving clients"):
        WorkloadConfig(workload="arena", scenario="s1")
