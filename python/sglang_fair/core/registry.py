"""A string-keyed registry of policy factories, so every policy is chosen by name."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from sglang_fair.core.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to factories of one kind of policy (``kind`` is used in error messages)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: register ``factory`` under ``name`` (names are unique)."""

        def add(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.kind} policy {name!r} registered twice")
            self._factories[name] = factory
            return factory

        return add

    def check(self, name: str) -> None:
        """Raise :class:`ConfigError`, listing the known names, unless ``name`` is registered."""
        if name not in self._factories:
            known = ", ".join(sorted(self._factories))
            raise ConfigError(f"unknown {self.kind} policy {name!r}; known: {known}")

    def create(self, name: str, *args: object, **kwargs: object) -> T:
        """Build the policy registered as ``name``; unknown names list the known ones."""
        self.check(name)
        return self._factories[name](*args, **kwargs)

    def get(self, name: str) -> Callable[..., T]:
        """The factory registered as ``name`` (for policies, the class: its capabilities)."""
        self.check(name)
        return self._factories[name]

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
