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

from sglang_fair.core.global_tree import unpack_tokens
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
    _prompts: dict[int, tuple[int, ...]] = field(default_factory=dict)
    _outputs: dict[int, bytes] = field(default_factory=dict)  # packed
    _children: dict[int, list[int]] = field(default_factory=dict)
    _by_parts: dict[tuple[Part, ...], tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, call in enumerate(self.program.calls):
            for d in call.deps:
                self._children.setdefault(d, []).append(i)

    def ready(self) -> list[int]:
        """Calls not yet released whose dependencies are all done; marks them released."""
        out = [
            i for i, c in enumerate(self.program.calls)
            if i not in self.released and all(d in self.done for d in c.deps)
        ]
        self.released.update(out)
        return out

    def finish(self, call: int) -> list[int]:
        """Mark ``call`` done; return the calls that became ready."""
        self.done.add(call)
        out = []
        for child in self._children.get(call, []):
            if child not in self.released and all(d in self.done for d in self.program.calls[child].deps):
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
        """The prompt of ``call``; calls with equal parts (siblings) get the same tuple object."""
        if call not in self._prompts:
            parts = self.program.calls[call].parts
            if parts in self._by_parts:
                self._prompts[call] = self._by_parts[parts]
                return self._prompts[call]
            pieces: list[int] = []
            for part in self.program.calls[call].parts:
                if isinstance(part, PromptOf):
                    pieces.extend(self.prompt(part.call))
                elif isinstance(part, OutputOf):
                    pieces.extend(self.output(part.call))
                else:
                    pieces.extend(part)
            self._prompts[call] = self._by_parts[parts] = tuple(pieces)
        return self._prompts[call]


def call_count(programs: list[Program]) -> int:
    return sum(len(p.calls) for p in programs)
