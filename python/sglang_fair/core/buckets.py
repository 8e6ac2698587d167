"""Index buckets: a key -> set-of-ids table that drops a bucket once it is empty (the waiting-queue
match indexes of the SGLang plugin and of the simulator use it)."""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V", bound=Hashable)


def unlink(table: MutableMapping[K, set[V]], key: K, item: V) -> None:
    """Remove ``item`` from ``table[key]``, and the bucket itself once empty."""
    bucket = table.get(key)
    if bucket is not None:
        bucket.discard(item)
        if not bucket:
            del table[key]
