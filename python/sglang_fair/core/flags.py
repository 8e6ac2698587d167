"""CLI flags derived from a frozen configuration dataclass, so each option is declared once.

Each field of a dataclass becomes ``--field-name``; its type (int, float, str, bool) gives the
argparse type; ``field(metadata={"help": ...})`` gives the help text; fields whose type is another
dataclass or a mapping are skipped (build those from their own flags).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, TypeVar

T = TypeVar("T")
_SCALARS: dict[Any, type] = {int: int, float: float, str: str}


def _flag(name: str, prefix: str) -> str:
    return "--" + (prefix + name).replace("_", "-")


def add_flags(
    parser: argparse.ArgumentParser, cls: type[Any], prefix: str = "", skip: tuple[str, ...] = ()
) -> None:
    """Add one flag per scalar field of dataclass ``cls`` but ``skip`` (defaults shown in ``--help``)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        kind = hints[f.name]
        default = f.default if f.default is not dataclasses.MISSING else None
        help_text = f.metadata.get("help", "")
        if kind is bool:
            parser.add_argument(
                _flag(f.name, prefix), dest=prefix + f.name, default=default,
                action=argparse.BooleanOptionalAction, help=help_text,
            )
        elif kind in _SCALARS:
            choices = f.metadata.get("choices")
            parser.add_argument(
                _flag(f.name, prefix), dest=prefix + f.name, type=_SCALARS[kind], default=default,
                choices=choices, help=f"{help_text} (default: {default})".strip(),
            )


def from_flags(cls: type[T], args: argparse.Namespace, prefix: str = "", **extra: Any) -> T:
    """Build ``cls`` from the flags :func:`add_flags` added, plus ``extra`` non-scalar fields."""
    values: dict[str, Any] = dict(extra)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = prefix + f.name
        if f.name not in values and hasattr(args, key):
            values[f.name] = getattr(args, key)
    return cls(**values)
