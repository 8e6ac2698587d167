"""What processes cost while something runs, read from Linux ``/proc`` (``sglang-fair lab gateway-speed``):
a process tree's CPU seconds and resident memory, the cores each of several trees kept busy during a
call, and pinning a process to one core. Where ``/proc`` is missing the figures are 0 and pinning is
skipped (a process gone meanwhile counts 0 too).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``; [] where it is not)."""
    out, todo = [], [pid]
    while todo:
        here = todo.pop()
        out.append(here)
        try:
            for task in os.listdir(f"/proc/{here}/task"):
                with open(f"/proc/{here}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (0 for one gone)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pids: list[int]) -> float:
    """The resident memory of ``pids`` summed, in MiB (one decimal)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return round(total * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def busy_cores(parts: dict[str, int], run: Callable[[], T]) -> tuple[T, dict[str, float]]:
    """Run ``run``; its result and the cores each part (name -> the root pid of its process tree; this
    process, the load generator, without its children) kept busy meanwhile."""
    trees = {name: [pid] if pid == os.getpid() else tree(pid) for name, pid in parts.items()}
    before = {name: cpu_seconds(pids) for name, pids in trees.items()}
    start = time.perf_counter()
    result = run()
    wall = time.perf_counter() - start
    return result, {name: round((cpu_seconds(trees[name]) - before[name]) / wall, 2) for name in trees}


def pin(pid: int, core: int) -> None:
    """Pin ``pid``, every thread of it (``sched_setaffinity`` of a pid pins its main thread alone, and a
    multi-threaded server, SMG's runtime, would run the others on any core), to ``core`` on a machine
    with two or more cores (elsewhere: nothing)."""
    if (os.cpu_count() or 1) < 2 or not hasattr(os, "sched_setaffinity"):
        return
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        threads = [pid]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, {core})
        except ProcessLookupError:  # a thread that ended meanwhile
            continue
