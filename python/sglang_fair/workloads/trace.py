"""Trace replay: any CSV or JSONL with arrival times and lengths becomes one-call programs.

Columns are recognized by name: arrival ``req_time``/``arrival``/``time`` (seconds), ``timestamp``
(milliseconds, the Mooncake convention) or ``TIMESTAMP`` (a date-time, the Azure traces); input
``prompt_len``/``input_length``/``ContextTokens``/``input_len``; output ``output_len``/
``output_length``/``GeneratedTokens``. A ``client`` column names clients (the VTC LMSYS trace's 27
real clients); otherwise rows go to ``c0..c{N-1}`` round robin. Mooncake ``hash_ids`` become
shared 512-token blocks (equal ids, equal tokens); other prompts are unique random tokens.
Arrivals are relative to the first row, divided by ``time_scale``, and cut at ``duration``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from sglang_fair.core.errors import ConfigError
from sglang_fair.workloads.config import WorkloadConfig
from sglang_fair.workloads.program import Call, Program
from sglang_fair.workloads.tokens import random_tokens, seeded_rng

BLOCK = 512
_ARRIVAL_S = ("req_time", "arrival", "arrival_time", "time")
_INPUT = ("prompt_len", "input_length", "ContextTokens", "input_len", "num_prefill_tokens")
_OUTPUT = ("output_len", "output_length", "GeneratedTokens", "num_decode_tokens")
SOURCE_FILES = {"mooncake": "mooncake/conversation_trace.jsonl", "vtc": "vtc_lmsys/real_trace.csv"}


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open() as f:
            if path.suffix in (".jsonl", ".json"):
                for line in f:
                    if line.strip():
                        yield json.loads(line)
            else:
                yield from csv.DictReader(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as err:
        raise ConfigError(f"cannot read trace file {str(path)!r}: {err}") from None


def _pick(row: dict[str, Any], names: tuple[str, ...], what: str, path: Path) -> Any:
    for n in names:
        if n in row and row[n] not in (None, ""):
            return row[n]
    raise ConfigError(f"trace file {str(path)!r}: no {what} column (expected one of {', '.join(names)})")


def _arrival(row: dict[str, Any], path: Path) -> float:
    if "TIMESTAMP" in row:
        return datetime.fromisoformat(str(row["TIMESTAMP"])[:26]).timestamp()
    if "timestamp" in row:
        return float(row["timestamp"]) / 1000.0
    return float(_pick(row, _ARRIVAL_S, "arrival time", path))


def load_trace(config: WorkloadConfig, path: Path) -> list[Program]:
    """Programs of a trace file (one call each), in arrival order."""
    if not path.is_file():
        raise ConfigError(f"cannot read trace file {str(path)!r}: no such file")
    programs: list[Program] = []
    t0: float | None = None
    names = config.client_names()
    for i, row in enumerate(_rows(path)):
        try:
            t = _arrival(row, path)
            n_in = int(float(_pick(row, _INPUT, "input length", path)))
            n_out = max(1, int(float(_pick(row, _OUTPUT, "output length", path))))
        except (ValueError, TypeError) as err:
            raise ConfigError(f"trace file {str(path)!r}, row {i + 1}: {err}") from None
        t0 = t if t0 is None else t0
        arrival = (t - t0) / config.time_scale
        if arrival >= config.duration:
            break
        client = str(row["client"]) if "client" in row else names[i % len(names)]
        prompt = _prompt(config, i, n_in, row.get("hash_ids"))
        call = Call((prompt,), n_out)
        programs.append(Program(i, client, arrival, (call,), config.seed, False, "e2e", "trace"))
    if not programs:
        raise ConfigError(f"trace file {str(path)!r} has no request before --duration {config.duration}")
    return programs


def _prompt(config: WorkloadConfig, i: int, n_in: int, hash_ids: Any) -> tuple[int, ...]:
    if not hash_ids:
        return random_tokens(seeded_rng("trace", config.seed, i), max(1, n_in))
    tokens: list[int] = []
    for h in hash_ids:
        tokens.extend(_block(config.seed, int(h)))
    return tuple(tokens[: max(1, n_in)])


_BLOCKS: dict[tuple[int, int], tuple[int, ...]] = {}


def _block(seed: int, hid: int) -> tuple[int, ...]:
    key = (seed, hid)
    if key not in _BLOCKS:
        _BLOCKS[key] = random_tokens(seeded_rng("block", seed, hid), BLOCK)
    return _BLOCKS[key]
