"""Client programs: DAGs of LLM calls whose prompts reuse earlier prompts and outputs.

A :class:`Call` describes its prompt as a sequence of parts: literal token ids, ``PromptOf(i)`` (the
whole prompt of call ``i``) or ``OutputOf(i)`` (the tokens call ``i`` generated). A call may start
only when every call in ``deps`` has finished (closed loop). Prompts are materialized lazily by
:class:`ProgramRun`, so a 340-call tree does not hold every prompt at once. Generated output ids are
a seeded function of (seed, program, call), so a run is reproducible and a child's prompt shares
its parent's prompt and output exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core.global_tree import pack_tokens, unpack_tokens
from sglang_fair.workloads.tokens import output_tokens


@dataclass(frozen=True)
class PromptOf:
    call: int


@dataclass(frozen=True)
class OutputOf:
    call: int


Part = tuple[int, ...] | PromptOf | OutputOf


@dataclass(frozen=True)
class Call:
    """One LLM call: prompt parts, output length (tokens to generate), calls it waits for."""

    parts: tuple[Part, ...]
    output_len: int
    deps: tuple[int, ...] = ()
    slo: tuple[float | None, float | None] | None = None  # its own (TTFT, TPOT) s; None: its client's class


@dataclass(frozen=True)
class Program:
    """A client's program. ``metric`` is ``"e2e"`` (program latency) or ``"ttft"`` (first token)."""

    pid: int
    client: str
    arrival: float
    calls: tuple[Call, ...]
    seed: int = 0
    misbehaving: bool = False
    metric: str = "e2e"
    kind: str = "program"


@dataclass
class ProgramRun:
    """Run-time state of a program: which calls are done, and prompt/output materialization."""

    program: Program
    done: set[int] = field(default_factory=set)
    released: set[int] = field(default_factory=set)
    # literal parts packed, by id (the part is kept with its entry, so its id is not reused meanwhile); a
    # host running many programs passes one dict to every run, so a template shared by programs is packed once
    literals: dict[int, tuple[tuple[int, ...], bytes]] = field(default_factory=dict)
    _outputs: dict[int, bytes] = field(default_factory=dict)  # packed
    _children: dict[int, list[int]] = field(default_factory=dict)
    _by_parts: dict[tuple[Part, ...], bytes] = field(default_factory=dict)  # packed prompts by equal parts
    _by_parts_id: dict[int, tuple[tuple[Part, ...], bytes]] = field(default_factory=dict)  # and by identity

    def __post_init__(self) -> None:
        self._unfinished = [len(call.deps) for call in self.program.calls]  # dependencies not done, per call
        for i, call in enumerate(self.program.calls):
            for d in call.deps:
                self._children.setdefault(d, []).append(i)

    def ready(self) -> list[int]:
        """Calls not yet released whose dependencies are all done; marks them released."""
        out = [i for i, n in enumerate(self._unfinished) if n == 0 and i not in self.released]
        self.released.update(out)
        return out

    def finish(self, call: int) -> list[int]:
        """Mark ``call`` done; return the calls that became ready."""
        if call in self.done:
            return []
        self.done.add(call)
        out = []
        for child in self._children.get(call, ()):
            self._unfinished[child] -= 1
            if self._unfinished[child] == 0 and child not in self.released:
                self.released.add(child)
                out.append(child)
        return out

    @property
    def finished(self) -> bool:
        return len(self.done) == len(self.program.calls)

    def output(self, call: int) -> tuple[int, ...]:
        """The ids ``call`` generates (:func:`.tokens.output_tokens`)."""
        return unpack_tokens(self.output_packed(call))

    def output_packed(self, call: int) -> bytes:
        """:meth:`output` packed (:func:`~sglang_fair.core.global_tree.pack_tokens`)."""
        if call not in self._outputs:
            n = self.program.calls[call].output_len
            self._outputs[call] = output_tokens(n, "out", self.program.seed, self.program.pid, call)
        return self._outputs[call]

    def prompt(self, call: int) -> tuple[int, ...]:
        """The prompt of ``call``."""
        return unpack_tokens(self.packed_prompt(call))

    def packed_prompt(self, call: int) -> bytes:
        """:meth:`prompt` packed (:func:`~sglang_fair.core.global_tree.pack_tokens`), joined from packed
        parts; calls with equal parts (siblings) get the same bytes object."""
        parts = self.program.calls[call].parts
        same = self._by_parts_id.get(id(parts))  # siblings usually share the parts object: no hashing
        if same is None or same[0] is not parts:
            if parts not in self._by_parts:
                self._by_parts[parts] = b"".join(map(self._packed_part, parts))
            same = self._by_parts_id[id(parts)] = (parts, self._by_parts[parts])
        return same[1]

    def _packed_part(self, part: Part) -> bytes:
        if isinstance(part, PromptOf):
            return self.packed_prompt(part.call)
        if isinstance(part, OutputOf):
            return self.output_packed(part.call)
        hit = self.literals.get(id(part))
        if hit is None or hit[0] is not part:  # an id is only a key while its part lives: kept with it
            hit = self.literals[id(part)] = (part, pack_tokens(part))
        return hit[1]


def call_count(programs: list[Program]) -> int:
    return sum(len(p.calls) for p in programs)
