"""Snapshots from scheduler processes to the HTTP process (files), merged over DP ranks."""

from __future__ import annotations

import json
from pathlib import Path

from sglang_fair.sglang_plugin.publish import Publisher, read_all


def test_publisher_writes_on_change_and_when_idle(tmp_path: Path) -> None:
    pub = Publisher(tmp_path / "scheduler-0.json", "dlpm", interval=3600.0)
    pub.maybe_write(1, idle=False, snapshot=lambda: {"a": {"service": 1.0}})
    assert json.loads((tmp_path / "scheduler-0.json").read_text())["clients"]["a"]["service"] == 1.0
    pub.maybe_write(2, idle=False, snapshot=lambda: {"a": {"service": 2.0}})  # throttled while busy
    assert read_all(tmp_path)["clients"]["a"]["service"] == 1.0
    pub.maybe_write(2, idle=True, snapshot=lambda: {"a": {"service": 2.0}})  # idle: written at once
    assert read_all(tmp_path)["clients"]["a"]["service"] == 2.0


def test_first_snapshot_is_written_when_the_clock_starts_at_zero(tmp_path: Path) -> None:
    """``time.monotonic()`` counts from boot: a server started right after boot must publish at once."""
    now = [0.0]
    pub = Publisher(tmp_path / "scheduler-0.json", "dlpm", interval=0.1, clock=lambda: now[0])
    pub.maybe_write(1, idle=False, snapshot=lambda: {"a": {"service": 1.0}})
    assert read_all(tmp_path)["clients"]["a"]["service"] == 1.0
    now[0] = 0.05
    pub.maybe_write(2, idle=False, snapshot=lambda: {"a": {"service": 2.0}})  # within the interval
    assert read_all(tmp_path)["clients"]["a"]["service"] == 1.0
    now[0] = 0.2
    pub.maybe_write(3, idle=False, snapshot=lambda: {"a": {"service": 3.0}})
    assert read_all(tmp_path)["clients"]["a"]["service"] == 3.0


def test_read_all_sums_over_dp_ranks(tmp_path: Path) -> None:
    for rank, (counter, service) in enumerate(((1.0, 2.0), (3.0, 5.0))):
        data = {"policy": "dlpm", "clients": {"a": {"counter": counter, "service": service, "weight": 2.0}}}
        (tmp_path / f"scheduler-{rank}.json").write_text(json.dumps(data))
    merged = read_all(tmp_path)
    assert merged["schedulers"] == 2 and merged["policy"] == "dlpm"
    assert merged["clients"]["a"] == {"service": 7.0, "weight": 2.0, "counter": 4.0, "counters": [1.0, 3.0]}
    assert read_all(None) == {"policy": None, "schedulers": 0, "clients": {}, "internal": {}, "quantum": None}


def test_counters_are_per_rank_in_rank_order_with_null_where_the_client_never_was(tmp_path: Path) -> None:
    """With 11 workers, rank 10's file sorts before rank 2's as text; a client seen on ranks 0 and 10
    only must not look as if it ran on ranks 0 and 1."""
    for rank in range(11):
        clients = {"a": {"counter": float(-rank), "service": 1.0}} if rank in (0, 10) else {}
        clients["b"] = {"counter": float(rank), "service": 1.0}
        (tmp_path / f"scheduler-{rank}.json").write_text(json.dumps({"policy": "dlpm", "clients": clients}))
    merged = read_all(tmp_path)
    assert merged["schedulers"] == 11
    assert merged["clients"]["a"]["counters"] == [0.0] + [None] * 9 + [-10.0]
    assert merged["clients"]["a"]["counter"] == -10.0 and merged["clients"]["a"]["service"] == 2.0
    assert merged["clients"]["b"]["counters"] == [float(r) for r in range(11)]
