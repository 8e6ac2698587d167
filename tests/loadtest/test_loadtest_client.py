"""``sglang-fair bench`` against a fake OpenAI server on loopback: dependencies, identity, errors,
missing usage fields, the grace deadline and Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

from fake_openai import FakeServer, Running

from sglang_fair.cli import main as cli_main
from sglang_fair.core.cost import CostModel
from sglang_fair.loadtest.cli import bench
from sglang_fair.loadtest.config import LoadTestConfig
from sglang_fair.loadtest.summary import run_summary
from sglang_fair.workloads import OutputOf, WorkloadConfig, make_workload

ROOT = Path(__file__).resolve().parents[2]
SIM_KEYS = ("throughput", "actual_service_rate", "jain_index", "well_behaved_p50_s", "well_behaved_p99_s",
            "cache_hit_rate", "max_backlogged_service_diff", "clients")


def run(server: FakeServer, workload: WorkloadConfig, **cfg: object) -> tuple[dict, object]:
    with Running(server) as url:
        config = LoadTestConfig(base_url=url, **cfg)  # type: ignore[arg-type]
        loadrun, fairness = asyncio.run(bench(config, workload, CostModel(), 1.0, False))
    return run_summary(loadrun, fairness), loadrun


def tot(**kw: object) -> WorkloadConfig:
    args: dict[str, object] = {"workload": "tot", "depth": 2, "clients": 2, "duration": 2.0, "rate": 1.0}
    args.update(kw)
    return WorkloadConfig(**args)  # type: ignore[arg-type]


def test_children_are_sent_after_their_parents_with_the_real_text() -> None:
    server = FakeServer()
    workload = tot()
    doc, _ = run(server, workload)
    programs = make_workload(workload)
    assert len(server.seen) == sum(len(p.calls) for p in programs)
    assert doc["programs_finished"] == doc["programs"] == len(programs)
    uses_output = sum(any(isinstance(part, OutputOf) for part in c.parts) for p in programs for c in p.calls)
    children = 0
    for s in server.seen:
        parents = [o for o in server.seen if o.output and o.output in s.prompt]
        children += bool(parents)
        assert all(0 <= o.finished <= s.received for o in parents)
    assert children == uses_output > 0
    assert all(k in doc for k in SIM_KEYS)
    assert doc["cache_hit_rate"] > 0 and doc["missing"] == ["fairness", "retractions", "workers"]


def test_token_id_prompts_carry_the_output_ids() -> None:
    server = FakeServer()
    workload = tot()
    doc, _ = run(server, workload, token_ids=50)
    programs = make_workload(workload)
    assert doc["programs_finished"] == len(programs) and doc["errors"] == 0
    assert all(s.body.get("return_token_ids") and isinstance(s.body["prompt"], list) for s in server.seen)
    assert all(3 <= i < 50 or i >= 100000 for s in server.seen for i in s.body["prompt"])
    lengths = sorted(len(s.body["prompt"]) for s in server.seen)
    from sglang_fair.workloads import ProgramRun
    expected = sorted(len(ProgramRun(p).prompt(i)) for p in programs for i in range(len(p.calls)))
    assert lengths == expected  # the workload's prompt lengths, exactly
    children = [s for s in server.seen if any(o.output and o.output in s.prompt for o in server.seen)]
    uses_output = sum(any(isinstance(x, OutputOf) for x in c.parts) for p in programs for c in p.calls)
    assert len(children) == uses_output


def test_a_server_that_returns_no_ids_is_an_error() -> None:
    doc, _ = run(FakeServer(token_ids=False), tot(clients=1), token_ids=50)
    assert doc["clients"]["c0"]["errors"].get("no_token_ids", 0) > 0 and doc["programs_finished"] == 0


def test_missing_cached_tokens_are_null_not_zero() -> None:
    doc, _ = run(FakeServer(report_cached=False, fairness=True), tot(clients=1))
    assert doc["cache_hit_rate"] is None and doc["actual_service_rate"] is None
    assert doc["max_backlogged_service_diff"] is None
    assert doc["throughput"] > 0 and doc["clients"]["c0"]["actual_service"] is None
    assert "cached_tokens" in doc["missing"] and doc["fairness"] == {"clients": {}}


def test_chunk_counts_without_continuous_usage() -> None:
    doc, loadrun = run(FakeServer(continuous_usage=False), tot(clients=1), api="chat")
    assert doc["calls_answered"] == doc["calls_sent"] > 0
    outputs = sum(c.output_len for p in make_workload(tot(clients=1)) for c in p.calls)
    inputs = sum(r.input_len for r in loadrun.result().requests)
    assert doc["tpot_p50_s"] is not None
    assert doc["clients"]["c0"]["service"] == pytest.approx(inputs + 2 * outputs)  # w_e=1, w_q=2


def test_http_errors_are_counted_per_client_and_end_the_program() -> None:
    doc, _ = run(FakeServer(fail_clients=frozenset({"c1"})), tot())
    c0, c1 = doc["clients"]["c0"], doc["clients"]["c1"]
    # A ToT program sends its root's two samples at once: when one fails the program ends and the
    # other, if still in flight, is cancelled.
    assert c0["errors"] == {} and c1["requests"] > 0 and c1["errors"].get("http_500", 0) > 0
    assert set(c1["errors"]) <= {"http_500", "cancelled"} and sum(c1["errors"].values()) == c1["requests"]
    assert c1["calls_not_sent"] > 0 and doc["errors"] == c1["requests"]
    assert doc["programs_finished"] == c0["programs"]


@pytest.mark.parametrize(("identity", "check"), [
    ("header", lambda s: s.headers.get("X-Client-Id") == s.client),
    ("user", lambda s: s.body.get("user") == s.client and "X-Client-Id" not in s.headers),
])
def test_identity(identity: str, check: object) -> None:
    server = FakeServer()
    run(server, tot(), identity=identity)
    assert {s.client for s in server.seen} == {"c0", "c1"}
    assert all(check(s) for s in server.seen)  # type: ignore[operator]


def test_identity_by_key(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# key client weight\nk-zero c0 1\nk-one c1 2\n")
    server = FakeServer()
    run(server, tot(), identity="key", keys_file=str(keys))
    assert {s.client for s in server.seen} == {"k-zero", "k-one"}


def test_a_hanging_server_is_cut_at_duration_plus_grace() -> None:
    start = time.monotonic()
    doc, _ = run(FakeServer(hang=True), tot(duration=1.0), grace=1.0)
    assert time.monotonic() - start < 6
    assert doc["programs_finished"] == 0 and doc["calls_answered"] == 0
    assert sum(c["errors"].get("cancelled", 0) for c in doc["clients"].values()) == doc["calls_sent"] > 0
    assert doc["throughput"] == 0.0 and doc["cache_hit_rate"] is None  # nothing served, nothing to rate


def test_calls_cut_mid_stream_do_not_make_fields_missing() -> None:
    doc, _ = run(FakeServer(stall_after=2), tot(duration=1.0), grace=1.0)
    assert doc["calls_cut"] > 0 and doc["calls_answered"] > 0
    assert "cached_tokens" not in doc["missing"] and doc["cache_hit_rate"] is not None


def test_ctrl_c_writes_what_was_measured(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    with Running(FakeServer(hang=True)) as url:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sglang_fair", "bench", "--base-url", url, "--workload", "tot",
             "--depth", "2", "--clients", "2", "--duration", "30", "--rate", "2", "--json", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err.decode()
    doc = json.loads(out.read_text())
    assert doc["calls_sent"] > 0 and doc["makespan_s"] < 20 and b"interrupted" in err


@pytest.mark.parametrize("argv", [
    ["--base-url", "localhost:30000"],
    ["--base-url", "http://127.0.0.1:9", "--identity", "key"],
    ["--base-url", "http://127.0.0.1:9", "--grace", "-1"],
    ["--base-url", "http://127.0.0.1:9", "--token-ids", "50", "--api", "chat"],
    ["--base-url", "http://127.0.0.1:9", "--duration", "1"],  # nothing listens: no model list
])
def test_bad_flags_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "--no-progress", *argv]) == 2
    assert "sglang-fair bench: error:" in capsys.readouterr().err


def test_one_report_overlays_a_simulated_and_a_real_run(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    flags = ["--workload", "tot", "--depth", "1", "--clients", "2", "--duration", "2", "--rate", "1",
             "--no-progress"]
    sim_json, real_json, png = tmp_path / "sim.json", tmp_path / "real.json", tmp_path / "overlay.png"
    assert cli_main(["sim", *flags, "--json", str(sim_json)]) == 0
    with Running(FakeServer()) as url:
        assert cli_main(["bench", "--base-url", url, *flags, "--json", str(real_json)]) == 0
    sim, real = json.loads(sim_json.read_text()), json.loads(real_json.read_text())
    assert set(sim) - {"config"} <= set(real)  # every key of sim --json, plus the client-side ones
    assert set(real["service_series"]["clients"]) == set(sim["service_series"]["clients"]) == {"c0", "c1"}
    proc = subprocess.run([sys.executable, "-m", "sglang_fair", "lab", "overlay", str(png),
                           f"sim={sim_json}", f"real={real_json}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert png.stat().st_size > 1000
