"""Workload generators: client programs with arrival times, chosen by :class:`WorkloadConfig`.

``make_workload(config, dp)`` returns every program, sorted by arrival. Synthetic workloads (tot,
judge, qa, multiturn/mtbench) draw per-client Gamma arrivals at ``config.rate`` programs per second,
or, when it is 0, at a default that scales with the number of workers ``dp`` ([1] §6.1: "the
request rate increasing as the number of GPUs scales"). Trace workloads replay their timestamps;
``arena`` ([1] Fig. 8) replays the Chatbot Arena request times, rescaled by ``time_scale``.
Every generator is a function of the config alone (seeded by ``config.seed``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_fair.core.errors import ConfigError
from sglang_fair.workloads import arena, judge, multiturn, qa, shared_prompt, tot
from sglang_fair.workloads.arrivals import gamma_arrivals
from sglang_fair.workloads.config import WorkloadConfig, data_file
from sglang_fair.workloads.program import Call, OutputOf, Program, ProgramRun, PromptOf, call_count
from sglang_fair.workloads.tokens import Tokenizer, make_tokenizer, seeded_rng
from sglang_fair.workloads.trace import SOURCE_FILES, load_trace

# Default programs per second per worker, summed over clients: about 2x what one worker of the
# A100 preset finishes with well-behaved clients, so queues build up and scheduling matters.
DEFAULT_RATE_PER_WORKER = {"tot": 1.0, "judge": 2.4, "qa": 16.0, "multiturn": 12.0, "mix": 1.0,
                           "sysprompt": 18.0, "groups": 24.0}
# [1] Fig. 12's mix: two clients in multi-turn conversations, two sending programs (ToT, judge);
# client i sends MIX_KINDS[i % 4], every client at the same program rate.
MIX_KINDS = ("multiturn", "multiturn", "tot", "judge")


@dataclass(frozen=True)
class ProgramKind:
    """How programs of one kind are made: ``load`` reads the material every program of the run draws
    from (once per run: questions, documents, conversations), ``make`` makes one program from it."""

    load: Callable[[WorkloadConfig, Tokenizer, random.Random], Any]
    make: Callable[[WorkloadConfig, int, str, float, Any, Tokenizer, random.Random], Program]


def _tot(cfg: WorkloadConfig, pid: int, client: str, t: float, questions: Any, tok: Tokenizer,
         rng: random.Random) -> Program:
    return tot.make_program(cfg, pid, client, t, questions[rng.randrange(len(questions))], tok, rng)


def _judge(cfg: WorkloadConfig, pid: int, client: str, t: float, _: Any, tok: Tokenizer,
           rng: random.Random) -> Program:
    return judge.make_program(cfg, pid, client, t, tok, rng)


def _multiturn(cfg: WorkloadConfig, pid: int, client: str, t: float, turns: Any, tok: Tokenizer,
               rng: random.Random) -> Program:
    return multiturn.make_program(cfg, pid, client, t, turns[rng.randrange(len(turns))], tok, rng)


def _nothing(cfg: WorkloadConfig, tok: Tokenizer, rng: random.Random) -> None:
    return None


PROGRAM_KINDS: dict[str, ProgramKind] = {  # loaded in this order (the data draws are seeded in turn)
    "tot": ProgramKind(tot.load_questions, _tot),
    "judge": ProgramKind(_nothing, _judge),
    "qa": ProgramKind(qa.make_documents, qa.make_program),
    "multiturn": ProgramKind(multiturn.load_turns, _multiturn),
    "sysprompt": ProgramKind(shared_prompt.load_prompts, shared_prompt.make_program),
    "groups": ProgramKind(shared_prompt.load_prompts, shared_prompt.make_program),
}
S1_RATE_FACTORS = {"qa": qa.S1_RATE_FACTOR, "multiturn": multiturn.S1_RATE_FACTOR,
                   "sysprompt": shared_prompt.S1_RATE_FACTOR, "groups": shared_prompt.S1_RATE_FACTOR}


def make_workload(config: WorkloadConfig, dp: int = 1) -> list[Program]:
    """All programs of the run, sorted by (arrival, pid); pids are 0..n-1 in that order."""
    if config.workload == "trace":
        return _renumber(load_trace(config, Path(config.trace_file)))
    if config.workload == "multiturn" and config.source != "mtbench":
        return _renumber(load_trace(config, data_file(config, SOURCE_FILES[config.source])))
    tok = make_tokenizer(config)
    if config.workload == "arena":
        return _renumber(arena.make_programs(config, tok))
    kinds = {c: MIX_KINDS[i % len(MIX_KINDS)] if config.workload == "mix" else config.workload
             for i, c in enumerate(config.client_names())}
    data_rng = seeded_rng("data", config.seed)
    material = {name: kind.load(config, tok, data_rng)
                for name, kind in PROGRAM_KINDS.items() if name in kinds.values()}
    per_client = config.rate or DEFAULT_RATE_PER_WORKER[config.workload] * dp / config.clients
    programs: list[Program] = []
    for client, name in kinds.items():
        rate = per_client
        if config.misbehaving(client) and config.scenario == "s1":
            rate *= S1_RATE_FACTORS.get(config.workload, 1.0)
        times = gamma_arrivals(seeded_rng("arrivals", config.seed, client), rate, config.cv, config.duration)
        rng = seeded_rng("programs", config.seed, client)
        make = PROGRAM_KINDS[name].make
        programs.extend(make(config, pid, client, t, material[name], tok, rng)
                        for pid, t in enumerate(times, start=len(programs)))
    if not programs:
        raise ConfigError("the workload has no program: raise --duration or --rate")
    return _renumber(programs)


def _renumber(programs: list[Program]) -> list[Program]:
    ordered = sorted(programs, key=lambda p: (p.arrival, p.pid))
    return [
        Program(i, p.client, p.arrival, p.calls, p.seed, p.misbehaving, p.metric, p.kind)
        for i, p in enumerate(ordered)
    ]


__all__ = [
    "DEFAULT_RATE_PER_WORKER", "MIX_KINDS", "PROGRAM_KINDS", "Call", "OutputOf", "Program", "ProgramRun",
    "PromptOf", "WorkloadConfig", "call_count", "make_workload",
]
