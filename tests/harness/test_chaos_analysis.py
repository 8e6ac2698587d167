"""The chaos run's arithmetic on hand-built records: a fault's row, the recovery time, the charges."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

from sglang_fair.harness.chaos import (
    FAULTS,
    Fault,
    Window,
    charge_check,
    fault_row,
    fault_seconds,
    goals_missed,
    recovery_time,
)
from sglang_fair.harness.traffic import Record, read_stream

NOTHING = Fault("test", "nothing", lambda c: None, lambda c: None, 0.0)


def steady(start: float, end: float, per_s: int, client: str = "a") -> list[Record]:
    """``per_s`` requests answered every second over [start, end), each taking one second."""
    return [Record(client, False, t / per_s - 1.0, t / per_s, 200, "ok", prompt_tokens=5, completion_tokens=2)
            for t in range(int(start * per_s), int(end * per_s))]


def test_recovery_is_the_first_time_the_rate_is_back_to_most_of_the_baseline() -> None:
    records = steady(0, 20, 4) + steady(30, 60, 4)  # nothing answered for 10 s after the fault began
    assert recovery_time(records, Window(0, 20, 25, 60)) == 5.0 + 4.0  # 30 s + 0.8 x 5 s of answers
    assert recovery_time(records, Window(0, 20, 25, 28)) is None  # not within the watch
    assert recovery_time(steady(0, 60, 4), Window(0, 20, 25, 60)) == 0.5  # never slowed down


def test_a_fault_row_counts_what_overlapped_it_and_lists_the_failures() -> None:
    records = steady(0, 40, 2)
    records += [Record("a", True, 19.0, 24.0, 200, "cut", '{"message": "server-b was taken out"}'),
                Record("b", False, 21.0, 22.0, 503, "503", "no server could take it"),
                Record("b", False, 5.0, 6.0, 503, "503", "before the fault: not counted")]
    row = fault_row(NOTHING, records, Window(0, 20, 30, 40))
    assert row["outcomes"] == {"503": 1, "cut": 1, "ok": 21}  # answered in (20, 30] and those ending at 30-31
    assert row["in_flight_at_start"] == 1 + 2  # the cut stream and two steady requests in flight at 20
    assert row["slowest_s"] == 5.0 and row["baseline_per_s"] == 2.0
    assert row["failures"] == ['503: no server could take it', 'cut: {"message": "server-b was taken out"}']


def test_the_charges_equal_the_answers_only_when_each_request_was_charged_once() -> None:
    records = steady(0, 2, 2, "a")
    before = {"a": {"requests": 10, "input_tokens": 100, "output_tokens": 40}}
    once = {"a": {"requests": 14, "input_tokens": 120, "output_tokens": 48}}
    twice = {"a": {"requests": 15, "input_tokens": 125, "output_tokens": 50}}
    (row,) = charge_check(before, once, records).values()
    keys = ("requests", "input_tokens", "output_tokens")
    assert [row[f"charged_{k}"] == row[f"answered_{k}"] for k in keys] == [True, True, True]
    (row,) = charge_check(before, twice, records).values()
    assert row["charged_requests"] == 5 != row["answered_requests"]


def test_a_stream_ends_ok_at_done_cut_at_an_error_event_and_is_a_transport_error_otherwise() -> None:
    def read(lines: list[str]) -> Record:
        record = Record("a", True, 0.0)
        read_stream(io.BytesIO("".join(f"{line}\n\n" for line in lines).encode()), record, 1e9, lambda: 0.0)
        return record

    usage = 'data: {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}'
    ok = read(['data: {"choices": [{"delta": {"content": "x"}}]}', usage, "data: [DONE]"])
    assert (ok.outcome, ok.prompt_tokens, ok.completion_tokens) == ("ok", 7, 3)
    cut = read(['data: {"choices": []}', 'data: {"error": {"message": "taken out", "code": 503}}'])
    assert cut.outcome == "cut" and "taken out" in cut.detail
    assert read(['data: {"choices": []}']).outcome == "transport"


CLEAN_CHECK: dict[str, Any] = {"charges": {}, "not_ok": 0, "left": {"servers": {}, "gateways": {}}}


def test_a_run_that_injected_no_fault_misses_its_goals() -> None:
    """Found: ``--minutes 2`` skipped every fault and still printed "all goals met" with exit 0."""
    skipped = [{"fault": f, "skipped": "needs 95 s more than --minutes leaves"} for f in FAULTS]
    assert any("no fault was injected" in m for m in goals_missed(skipped, CLEAN_CHECK))
    ran = {"fault": "scheduler-stop", "outcomes": {"ok": 40, "503": 2}, "recovered_after_s": 3.0}
    assert goals_missed([ran, *skipped[1:]], CLEAN_CHECK) == []  # the control: one injected, all met


def test_chaos_refuses_minutes_that_leave_room_for_no_fault(tmp_path: Path) -> None:
    """Refused at once (exit 2, before a server starts), not a run that checks nothing."""
    done = subprocess.run([sys.executable, "-m", "sglang_fair", "lab", "chaos", "--model", str(tmp_path),
                           "--minutes", "2"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--minutes 2 leaves room for no fault" in done.stderr, done.stderr
    assert "cluster up" not in done.stdout
    assert fault_seconds("server-kill", 15.0, 40.0) > fault_seconds("scheduler-stop", 15.0, 40.0)
