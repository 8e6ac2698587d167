"""``sglang-fair sim``: output, JSON keys, plots, and clear errors with a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_fair.cli import build_parser, main
from sglang_fair.sim.cli import spec_from_flags

SMALL = ["sim", "--workload", "tot", "--scenario", "s2", "--clients", "3", "--depth", "2", "--rate", "0.3",
         "--duration", "5", "--dp", "2", "--synthetic-data", "--no-progress"]
KEYS = {"throughput", "actual_service_rate", "jain_index", "well_behaved_p50_s", "well_behaved_p99_s",
        "cache_hit_rate", "max_backlogged_service_diff", "clients"}


def test_single_run_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main([*SMALL, "--router", "d2lpm", "--policy", "dlpm", "--json", str(out)]) == 0
    assert "d2lpm:dlpm" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert set(doc) >= KEYS
    assert {"service", "p50_s", "p99_s", "requests"} <= set(doc["clients"]["c1"])


def test_compare_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.json"
    pairs = "round_robin:lpm,preble:lpm,client_rr:vtc,d2lpm:dlpm"
    assert main([*SMALL, "--compare", pairs, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert list(doc["runs"]) == pairs.split(",")
    for pair, run in doc["runs"].items():
        assert set(run) >= KEYS
        assert pair in text


def test_plot_dir_writes_one_png_per_run(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    pairs = "round_robin:lpm,d2lpm:dlpm"
    assert main([*SMALL, "--compare", pairs, "--plot-dir", str(tmp_path / "img")]) == 0
    for pair in pairs.split(","):
        assert (tmp_path / "img" / f"service_{pair.replace(':', '_')}.png").stat().st_size > 1000


@pytest.mark.parametrize(("args", "message"), [
    (["--router", "nope"], "unknown router 'nope'"),
    (["--compare", "round_robin:nope"], "unknown policy 'nope'"),
    (["--compare", "round_robin"], "is not router:policy"),
    (["--workload", "trace", "--trace-file", "/no/such/file.csv"], "cannot read trace file"),
    (["--fair-quantum", "-1"], "quantum (Q^u) must be >= 0"),
    (["--router-quantum", "0"], "quantum (Q^w) must be > 0"),
    (["--duration", "-1"], "duration must be > 0"),
    (["--router-replicas", "0"], "router_replicas must be >= 1"),
    (["--replica-lag", "-1"], "replica_lag must be >= 0"),
])
def test_bad_input_is_a_clear_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*SMALL, *args]) == 2
    assert message in capsys.readouterr().err


def test_bad_flag_value_exits_non_zero() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sim", "--dp", "two"])
    assert exc.value.code == 2


def test_replica_flags_reach_the_cluster_config() -> None:
    args = build_parser().parse_args([*SMALL, "--router-replicas", "3", "--no-replica-sharing",
                                      "--replica-lag", "4"])
    cluster = spec_from_flags(args).cluster
    assert (cluster.router_replicas, cluster.replica_sharing, cluster.replica_lag) == (3, False, 4)
    default = spec_from_flags(build_parser().parse_args(SMALL)).cluster
    assert (default.router_replicas, default.replica_sharing, default.replica_lag) == (1, True, 0)
