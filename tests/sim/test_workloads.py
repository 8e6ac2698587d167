"""Workload generators: seeded determinism, program structure, arrivals, trace replay."""

from __future__ import annotations

import itertools
import json
import random
import statistics
from pathlib import Path

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.workloads import ProgramRun, WorkloadConfig, call_count, make_workload, tot
from sglang_fair.workloads.arrivals import gamma_arrivals
from sglang_fair.workloads.tokens import SyntheticTokenizer


def _fingerprint(programs: list) -> list:
    out = []
    for p in programs:
        run = ProgramRun(p)
        out.append((p.client, round(p.arrival, 9), tuple(hash(run.prompt(i)) for i in range(len(p.calls)))))
    return out


@pytest.mark.parametrize("workload", ["tot", "judge", "qa", "multiturn"])
def test_same_seed_same_programs(workload: str) -> None:
    cfg = WorkloadConfig(workload=workload, scenario="s1", duration=8, rate=0.3, synthetic_data=True, depth=2)
    assert _fingerprint(make_workload(cfg)) == _fingerprint(make_workload(cfg))
    other = WorkloadConfig(workload=workload, scenario="s1", duration=8, rate=0.3, synthetic_data=True,
                           depth=2, seed=1)
    assert _fingerprint(make_workload(other)) != _fingerprint(make_workload(cfg))


def test_tot_tree_shape_and_prefix_sharing() -> None:
    cfg = WorkloadConfig(workload="tot", scenario="s1", clients=2, rate=0.5, duration=10, synthetic_data=True)
    programs = make_workload(cfg)
    sizes = {p.client: len(p.calls) for p in programs}
    assert sizes == {"c0": 340, "c1": 30}  # [1] Table 3: 4 vs 2 branches, 4 levels, forks at the root
    p = next(p for p in programs if p.client == "c1")
    run = ProgramRun(p)
    assert run.ready() == [0, 1]  # the root's B samples: no call above them
    assert run.prompt(0) == run.prompt(1)
    child = p.calls[2]
    assert child.deps == (0,) and p.calls[3].deps == (0,) and p.calls[4].deps == (1,)
    assert run.prompt(2)[: len(run.prompt(0)) + p.calls[0].output_len] == run.prompt(0) + run.output(0)
    assert run.prompt(2) == run.prompt(3)  # siblings: samples of the same prompt
    assert sorted(run.finish(0)) == [2, 3]


def test_tot_s2_question_ten_times_longer() -> None:
    cfg = WorkloadConfig(workload="tot", scenario="s2", clients=2, synthetic_data=True)
    tok, question = SyntheticTokenizer(0), tuple(range(50))
    bad = ProgramRun(tot.make_program(cfg, 0, "c0", 0.0, question, tok, random.Random(0))).prompt(0)
    good = ProgramRun(tot.make_program(cfg, 1, "c1", 0.0, question, tok, random.Random(0))).prompt(0)
    assert len(bad) - len(good) == 9 * len(question)


def test_judge_branch_solve_merge() -> None:
    cfg = WorkloadConfig(workload="judge", scenario="s1", clients=2, rate=0.5, duration=10,
                         synthetic_data=True)
    programs = make_workload(cfg)
    sizes = {p.client: len(p.calls) for p in programs}
    assert sizes == {"c0": 17, "c1": 3}  # 16 vs 2 dimensions, plus the merge
    p = next(p for p in programs if p.client == "c1")
    run = ProgramRun(p)
    assert run.ready() == [0, 1]
    assert p.calls[2].deps == (0, 1)
    a, b = run.prompt(0), run.prompt(1)
    shared = next(i for i in range(min(len(a), len(b))) if a[i] != b[i])
    assert shared > 1000  # the article is shared by the dimensions


def test_qa_single_call_ttft_and_s2_doubles_document() -> None:
    cfg = WorkloadConfig(workload="qa", scenario="s2", clients=2, rate=0.5, duration=10, synthetic_data=True,
                         documents=20)
    programs = make_workload(cfg)
    assert all(len(p.calls) == 1 and p.metric == "ttft" for p in programs)
    lens = {p.client: len(ProgramRun(p).prompt(0)) for p in programs}
    assert lens["c0"] > 1.4 * lens["c1"]


def test_gamma_arrivals_rate_and_cv() -> None:
    times = gamma_arrivals(random.Random(3), rate=10.0, cv=2.0, duration=2000.0)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert 0.9 * 20000 < len(times) < 1.1 * 20000
    assert 1.8 < statistics.pstdev(gaps) / statistics.mean(gaps) < 2.2


def test_synthetic_tokenizer_is_seeded_and_prefix_preserving() -> None:
    tok = SyntheticTokenizer(0)
    text = "Janet's ducks lay 16 eggs per day."
    assert tok.encode(text) == SyntheticTokenizer(0).encode(text)
    assert tok.encode(text) != SyntheticTokenizer(1).encode(text)
    assert 6 <= len(tok.encode(text)) <= 14  # GPT-2 gives 10 tokens


def test_trace_csv_with_clients_and_jsonl_with_hash_ids(tmp_path: Path) -> None:
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("req_id,client,req_time,prompt_len,output_len\n0,a,0.0,5,3\n1,b,0.5,7,2\n2,a,9,4,1\n")
    progs = make_workload(WorkloadConfig(workload="trace", trace_file=str(csv_path), duration=5))
    assert [(p.client, p.arrival, len(ProgramRun(p).prompt(0)), p.calls[0].output_len) for p in progs] == [
        ("a", 0.0, 5, 3), ("b", 0.5, 7, 2)]
    jl = tmp_path / "t.jsonl"
    rows = [{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [7, 8]},
            {"timestamp": 1500, "input_length": 1000, "output_length": 4, "hash_ids": [7, 9]}]
    jl.write_text("\n".join(json.dumps(r) for r in rows))
    progs = make_workload(WorkloadConfig(workload="trace", trace_file=str(jl), clients=2, duration=10))
    a, b = (ProgramRun(p).prompt(0) for p in progs)
    assert (len(a), len(b), progs[1].arrival, progs[1].client) == (600, 1000, 1.5, "c1")
    assert a[:512] == b[:512] and a[512:600] != b[512:600]  # equal hash ids = equal 512-token blocks


def test_unreadable_or_malformed_trace_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read trace file"):
        make_workload(WorkloadConfig(workload="trace", trace_file=str(tmp_path / "missing.csv")))
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="no arrival time column"):
        make_workload(WorkloadConfig(workload="trace", trace_file=str(bad)))


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="unknown workload"):
        WorkloadConfig(workload="nope")
    with pytest.raises(ConfigError, match="needs --trace-file"):
        WorkloadConfig(workload="trace")
    with pytest.raises(ConfigError, match="at least 2 clients"):
        WorkloadConfig(scenario="s1", clients=1)


def test_real_data_sources_load() -> None:
    vtc = make_workload(WorkloadConfig(workload="multiturn", source="vtc", duration=600))
    assert len({p.client for p in vtc}) == 27 and call_count(vtc) == 1499
    tot = make_workload(WorkloadConfig(workload="tot", duration=5, rate=1.0))
    assert len(ProgramRun(tot[0]).prompt(0)) > 30
