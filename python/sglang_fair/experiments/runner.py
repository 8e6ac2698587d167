"""The one way experiments run their points: a list of :class:`Task` run in a process pool (or in
this process with ``jobs=1``), each result handed to ``on_done`` as it finishes, and results files
written whole or not at all.

A task's function and arguments must pickle when ``jobs > 1`` (module-level functions, frozen
configs, programs). Pool processes run at nice 10 or more: the machine is shared.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]  # where results/ and docs/ are by default


@dataclass(frozen=True)
class Task:
    """One point: ``fn(*args)``, filed by the caller under ``key``."""

    key: Any
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


def run_tasks(tasks: Sequence[Task], jobs: int = 1,
              on_done: Callable[[Task, Any], None] | None = None) -> list[Any]:
    """Run every task, ``jobs`` at a time; call ``on_done(task, result)`` as each finishes (in the
    order they finish) and return the results in the order of ``tasks``."""
    results: list[Any] = [None] * len(tasks)
    if jobs <= 1:
        for i, task in enumerate(tasks):
            results[i] = task.fn(*task.args)
            if on_done is not None:
                on_done(task, results[i])
        return results
    with ProcessPoolExecutor(max_workers=jobs, initializer=_nice) as pool:
        futures = {pool.submit(task.fn, *task.args): i for i, task in enumerate(tasks)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            if on_done is not None:
                on_done(tasks[i], results[i])
    return results


def _nice() -> None:
    os.nice(max(0, 10 - os.nice(0)))


def load_json(path: Path, default: Any) -> Any:
    """The JSON document at ``path``, or ``default`` when there is none."""
    return json.loads(path.read_text()) if path.exists() else default


def save_json(path: Path, doc: Any, indent: int | None = None) -> None:
    """Write ``doc`` to ``path`` through a temporary file (a reader never sees half a file);
    ``indent=None`` writes it compact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    separators = (",", ":") if indent is None else None
    tmp.write_text(json.dumps(doc, indent=indent, separators=separators, default=str))
    tmp.replace(path)


def log(msg: str) -> None:
    """A time-stamped progress line on stdout."""
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def log_row(row: dict[str, Any]) -> None:
    """A finished sweep row, as one JSON line on stderr."""
    print(json.dumps(row), file=sys.stderr, flush=True)


def floats(text: str) -> list[float]:
    """``"1,2.5"`` -> [1.0, 2.5]."""
    return [float(x) for x in text.split(",") if x.strip()]


def ints(text: str) -> list[int]:
    """``"1,2"`` -> [1, 2]."""
    return [int(x) for x in text.split(",") if x.strip()]


def names(text: str) -> list[str]:
    """``"a, b,"`` -> ["a", "b"]."""
    return [x.strip() for x in text.split(",") if x.strip()]
