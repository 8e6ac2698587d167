"""CLI flags derived from a frozen configuration dataclass, so each option is declared once.

Each field of a dataclass becomes ``--PREFIXfield-name``; its type (int, float, str, bool) gives the
argparse type; a ``Mapping[str, float]`` field (client weights) is one flag, ``a=2,b=1`` or a JSON
object; ``field(metadata={"help": ...})`` gives the help text; fields whose type is another
dataclass are skipped (build those from their own flags, with a prefix where two components share a
command line: a config class names its own in ``flag_prefix``, a ``ClassVar``, so every command
spells its flags the same way). :func:`to_flags` writes a config back as the flags that rebuild it,
so a process started by another gets the same config through the same declaration.
"""

from __future__ import annotations

import argparse
import collections.abc
import dataclasses
import functools
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from sglang_fair.core.cost import format_weights, parse_weights
from sglang_fair.core.errors import ConfigError

T = TypeVar("T")
_SCALARS: dict[Any, type] = {int: int, float: float, str: str}


def _flag(name: str, prefix: str) -> str:
    return "--" + (prefix + name).replace("_", "-")


def _prefix(cls: Any, prefix: str | None) -> str:
    return str(getattr(cls, "flag_prefix", "")) if prefix is None else prefix


def add_flags(
    parser: argparse.ArgumentParser, cls: type[Any], prefix: str | None = None, skip: tuple[str, ...] = ()
) -> None:
    """Add one flag per scalar field of dataclass ``cls`` but ``skip`` (defaults shown in ``--help``)."""
    prefix = _prefix(cls, prefix)
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
        elif typing.get_origin(kind) is collections.abc.Mapping:
            parse = f.metadata.get("parse", parse_weights)
            parser.add_argument(
                _flag(f.name, prefix), dest=prefix + f.name, type=functools.partial(_mapping, parse),
                default=None,
                help=f"{help_text} (default: none)".strip(),
            )
        elif kind in _SCALARS:
            choices = f.metadata.get("choices")
            parser.add_argument(
                _flag(f.name, prefix), dest=prefix + f.name, type=_SCALARS[kind], default=default,
                choices=choices, help=f"{help_text} (default: {default})".strip(),
            )


def from_flags(cls: type[T], args: argparse.Namespace, prefix: str | None = None, **extra: Any) -> T:
    """Build ``cls`` from the flags :func:`add_flags` added, plus ``extra`` non-scalar fields."""
    prefix = _prefix(cls, prefix)
    values: dict[str, Any] = dict(extra)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = prefix + f.name
        if f.name not in values and getattr(args, key, None) is not None:
            values[f.name] = getattr(args, key)
    return cls(**values)


def to_flags(config: Any, prefix: str | None = None, skip: tuple[str, ...] = ()) -> list[str]:
    """The flags that :func:`from_flags` turns back into ``config`` (its scalar and mapping fields)."""
    prefix = _prefix(config, prefix)
    hints = typing.get_type_hints(type(config))
    out: list[str] = []
    for f in dataclasses.fields(config):
        kind, value = hints[f.name], getattr(config, f.name)
        if f.name in skip:
            continue
        if kind is bool:
            out.append(_flag(f.name, prefix) if value else "--no-" + _flag(f.name, prefix)[2:])
        elif typing.get_origin(kind) is collections.abc.Mapping:
            out += [_flag(f.name, prefix), format_weights(value)]
        elif kind in _SCALARS:
            out += [_flag(f.name, prefix), str(value)]
    return out


def _mapping(parse: Callable[[str], dict[str, float]], text: str) -> dict[str, float]:
    try:
        return parse(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
