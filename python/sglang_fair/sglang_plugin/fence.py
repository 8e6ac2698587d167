"""The run-time fence around SGLang: nothing is hooked unless SGLang is the pinned version and every
name the plugin relies on is where it was (hooks.py's tables), so an upgrade fails at start-up with
one message naming what moved, not later inside a scheduler step.

The check imports the SGLang modules the tables name; it runs once, in the first process that loads
the plugin (the launcher), which marks the environment so SGLang's child processes skip it.
"""

from __future__ import annotations

import inspect
import os
import pkgutil
import re
from collections.abc import Iterable, Sequence

from sglang_fair.core.errors import ConfigError

ENV_CHECKED = "SGLANG_FAIR_FENCE_CHECKED"  # the SGLang version a parent process already checked


class SGLangMoved(ConfigError):
    """The installed SGLang is not the one the plugin was built against."""


def problems(version: str | None = None, hooks: Iterable[tuple[str, Sequence[str]]] | None = None,
             used: Iterable[str] | None = None,
             attributes: Iterable[tuple[str, Sequence[str]]] | None = None) -> list[str]:
    """Everything that differs from what the plugin expects (empty: safe to hook).

    Defaults: the installed ``sglang.__version__`` and the tables of ``hooks.py``.
    """
    from sglang_fair.sglang_plugin import hooks as table

    if version is None:
        import sglang

        version = sglang.__version__
    found = [] if version == table.SGLANG_VERSION else [
        f"SGLang {version} is installed; this plugin is built and tested against {table.SGLANG_VERSION}"]
    for target, params in (((h.target, h.params) for h in table.HOOKS) if hooks is None else hooks):
        obj = _resolve(target, found)
        if obj is not None:
            found += _missing_params(target, obj, params)
    for name in table.USED_NAMES if used is None else used:
        _resolve(name, found)
    for cls_name, attrs in table.ATTRIBUTES if attributes is None else attributes:
        cls = _resolve(cls_name, found)
        if isinstance(cls, type):
            found += [f"{cls_name} no longer sets .{a}" for a in attrs if not has_attribute(cls, a)]
        elif cls is not None:
            found.append(f"{cls_name} is no longer a class")
    return found


def check() -> None:
    """Raise :class:`SGLangMoved` naming every problem, unless a parent process already checked."""
    import sglang

    if os.environ.get(ENV_CHECKED) == sglang.__version__:
        return
    found = problems(sglang.__version__)
    if found:
        raise SGLangMoved("sglang-fair will not hook into this SGLang:\n  " + "\n  ".join(found))
    os.environ[ENV_CHECKED] = sglang.__version__


def has_attribute(cls: type, attr: str) -> bool:
    """Whether instances of ``cls`` get ``attr``: a class attribute, an annotation (dataclasses,
    msgspec structs) or an assignment ``self.attr = ...`` in the source of a class of its MRO."""
    if hasattr(cls, attr):
        return True
    assign = re.compile(rf"\bself\.{re.escape(attr)}\s*(:[^=\n]*)?=(?!=)")
    for klass in cls.__mro__:
        if attr in getattr(klass, "__annotations__", {}):
            return True
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if assign.search(source):
            return True
    return False


def _resolve(name: str, found: list[str]) -> object | None:
    try:
        obj: object = pkgutil.resolve_name(name)
        return obj
    except (ImportError, AttributeError, ValueError) as err:
        found.append(f"{name} is missing ({type(err).__name__}: {err})")
        return None


def _missing_params(target: str, obj: object, params: Sequence[str]) -> list[str]:
    try:
        have = inspect.signature(obj).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return [f"{target} has no readable signature"]
    return [f"{target} lacks parameter {p!r} (has {', '.join(have)})" for p in params if p not in have]
