"""A simulated request: what the policies read, plus what the engine tracks while it runs.

One type serves both drivers of the engine (the event-driven :class:`~sglang_fair.sim.simulator.
Simulator` and the lock-step :class:`~sglang_fair.sim.lockstep.Lockstep`); what a run reports about a
request (times, cache hits) lives in its :class:`~sglang_fair.metrics.ledger.RequestRecord`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sglang_fair.core.global_tree import WIDTH, pack_tokens, unpack_tokens
from sglang_fair.core.radix_cache import CacheNode


@dataclass(eq=False)
class EngineRequest:
    """One LLM call. ``tokens`` is the prompt (after a retraction: prompt + output so far);
    ``output_ids`` the tokens it will produce, or ``output_packed`` them packed (the simulator gives
    them packed; ids given are packed on first need). ``packed`` is ``tokens`` packed (the key the
    caches and the router compare; made from ``tokens`` when not given, kept with it after a retraction)."""

    rid: int
    client: str
    tokens: Sequence[int]
    output_len: int
    arrival: float
    output_ids: Sequence[int] = field(default_factory=list)
    pid: int = -1  # the program it belongs to (-1: none)
    call: int = -1  # its index among the program's calls
    prompt_len: int = 0  # the original prompt's length (0: len(tokens))
    cached_len: int = 0  # prefix held by the worker's cache when last matched
    generated: int = 0
    worker: int = -1
    reserved: int = 0  # pool tokens held outside the tree
    node: CacheNode | None = None  # locked cache path of the reused prefix
    prefilled: int = 0  # tokens of ``tokens`` whose KV exists (reused prefix + computed chunks)
    extend_reserved: int = 0  # pool tokens reserved for the uncached input
    prefills: int = 0  # completed prefills (more than 1 after a retraction)
    key: object = None  # equal prompts share a key object (None after a retraction): one match for all
    packed: bytes = b""
    output_packed: bytes = b""
    sync_clock: int = 0  # while running: the worker's decode clock when generated/reserved were last updated
    finish_clock: int = 0  # while running: the decode clock at which the request produces its last token
    slo: tuple[float | None, float | None] | None = None  # its own (TTFT, TPOT) targets (batching/slo.py)

    def __post_init__(self) -> None:
        self.prompt_len = self.prompt_len or len(self.tokens)
        if len(self.packed) != WIDTH * len(self.tokens):
            self.packed = pack_tokens(self.tokens)

    @property
    def input_len(self) -> int:
        return len(self.tokens)

    @property
    def done(self) -> bool:
        return self.generated >= self.output_len

    def full_sequence(self) -> list[int]:
        return [*self.tokens[: self.prompt_len], *unpack_tokens(self._output()[: WIDTH * self.generated])]

    def output_past_prompt(self) -> bytes:
        """``full_sequence()[input_len:]`` packed: the output generated beyond ``tokens`` (which holds
        the output of earlier runs after a retraction), without copying the prompt."""
        return self._output()[WIDTH * (len(self.tokens) - self.prompt_len) : WIDTH * self.generated]

    def _output(self) -> bytes:
        if not self.output_packed and self.output_ids:
            self.output_packed = pack_tokens(self.output_ids)
        return self.output_packed
