"""Fit a linear step-time model to measured step times and use it in the simulator.

    python -m sglang_fair.sim.fit [--relative] steps.csv [more.csv ...] > model.json
    sglang-fair sim --step-model model.json ...

``steps.csv`` has one measured step per row: ``requests,new_tokens,context_tokens,attention_pairs,
seconds[,prefill][,prefix_pairs]`` (``attention_pairs`` may be omitted: 0; ``prefill`` 1/0, when omitted a
row is a prefill step if it computes more tokens than it has requests; ``prefix_pairs``, when omitted,
is that of equal cached prefixes: r * (p/r)^2 / 2 for the p = context - new cached tokens of a prefill
row's r requests, exact for the one-request prefills ``sglang-fair lab cpu-steps`` measures). The
JSON holds the coefficients of :class:`~sglang_fair.sim.steptime.LinearStepModel`; ``--relative``
minimizes relative errors.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import asdict
from pathlib import Path

from sglang_fair.core.errors import ConfigError
from sglang_fair.sim.steptime import LinearStepModel, StepShape, fit_linear


def read_samples(path: Path) -> list[tuple[StepShape, float]]:
    """(shape, seconds) rows of a measurement CSV."""
    try:
        with path.open() as f:
            rows = list(csv.DictReader(f))
        return [(_shape(r), float(r["seconds"])) for r in rows]
    except (OSError, KeyError, ValueError, ZeroDivisionError) as err:
        raise ConfigError(f"cannot read step measurements {str(path)!r}: {err}") from None


def _shape(row: dict[str, str]) -> StepShape:
    requests, new, context = int(row["requests"]), int(row["new_tokens"]), int(row["context_tokens"])
    prefill = _is_prefill(row)
    pairs = 0.0
    if row.get("prefix_pairs"):
        pairs = float(row["prefix_pairs"])
    elif prefill:  # equal cached prefixes
        pairs = (context - new) ** 2 / (2 * requests)
    return StepShape(requests, new, context, float(row.get("attention_pairs") or 0.0), prefill, pairs)


def _is_prefill(row: dict[str, str]) -> bool:
    flag = (row.get("prefill") or "").strip()
    return flag == "1" if flag else int(row["new_tokens"]) > int(row["requests"])


def load_model(path: Path) -> LinearStepModel:
    """A :class:`LinearStepModel` from the JSON that :func:`main` writes."""
    try:
        return LinearStepModel(**json.loads(path.read_text()))
    except (OSError, TypeError, ValueError) as err:
        raise ConfigError(f"cannot read step model {str(path)!r}: {err}") from None


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    relative = "--relative" in args
    args = [a for a in args if a != "--relative"]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        samples = [sample for arg in args for sample in read_samples(Path(arg))]
        model = fit_linear(samples, name="+".join(Path(a).stem for a in args), relative=relative)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(model), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
