"""A simulated request: what the policies read, plus what the engine tracks while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core.radix_cache import CacheNode


@dataclass(eq=False)
class SimRequest:
    """One LLM call. ``tokens`` is the prompt; ``output_ids`` the tokens it will produce."""

    rid: int
    client: str
    tokens: list[int]
    output_len: int
    arrival: float
    output_ids: list[int] = field(default_factory=list)
    cached_len: int = 0  # prefix held by the worker's cache when last matched
    generated: int = 0
    worker: int = -1
    reserved: int = 0  # pool tokens held outside the tree
    node: CacheNode | None = None  # locked cache path of the reused prefix
    admitted_at: float | None = None
    first_token_at: float | None = None
    finished_at: float | None = None
    extend_tokens: int = 0  # input tokens actually prefilled

    @property
    def input_len(self) -> int:
        return len(self.tokens)

    @property
    def done(self) -> bool:
        return self.generated >= self.output_len
