"""Workload generators: client programs with arrival times, chosen by :class:`WorkloadConfig`.

``make_workload(config, dp)`` returns every program, sorted by arrival. Synthetic workloads (tot,
judge, qa, multiturn/mtbench) draw per-client Gamma arrivals at ``config.rate`` programs per second,
or, when it is 0, at a default that scales with the number of workers ``dp`` ([1] §6.1: "the
request rate increasing as the number of GPUs scales"). Trace workloads replay their timestamps;
``arena`` ([1] Fig. 8) replays the Chatbot Arena request times, rescaled by ``time_scale``.
Every generator is a function of the config alone (seeded by ``config.seed``).
"""

from __future__ import annotations

from pathlib import Path

from sglang_fair.core.errors import ConfigError
from sglang_fair.workloads import arena, judge, multiturn, qa, tot
from sglang_fair.workloads.arrivals import gamma_arrivals
from sglang_fair.workloads.config import WorkloadConfig, data_file
from sglang_fair.workloads.program import Call, OutputOf, Program, ProgramRun, PromptOf, call_count
from sglang_fair.workloads.tokens import make_tokenizer, seeded_rng
from sglang_fair.workloads.trace import SOURCE_FILES, load_trace

# Default programs per second per worker, summed over clients: about 2x what one worker of the
# A100 preset finishes with well-behaved clients, so queues build up and scheduling matters.
DEFAULT_RATE_PER_WORKER = {"tot": 1.0, "judge": 2.4, "qa": 16.0, "multiturn": 12.0, "mix": 1.0}
# [1] Fig. 12's mix: two clients in multi-turn conversations, two sending programs (ToT, judge);
# client i sends MIX_KINDS[i % 4], every client at the same program rate.
MIX_KINDS = ("multiturn", "multiturn", "tot", "judge")


def make_workload(config: WorkloadConfig, dp: int = 1) -> list[Program]:
    """All programs of the run, sorted by (arrival, pid); pids are 0..n-1 in that order."""
    if config.workload == "trace" or (config.workload == "multiturn" and config.source != "mtbench"):
        if config.workload == "trace":
            path = Path(config.trace_file)
        else:
            path = data_file(config, SOURCE_FILES[config.source])
        return _renumber(load_trace(config, path))
    tok = make_tokenizer(config)
    if config.workload == "arena":
        return _renumber(arena.make_programs(config, tok))
    data_rng = seeded_rng("data", config.seed)
    per_client = config.rate or DEFAULT_RATE_PER_WORKER[config.workload] * dp / config.clients
    programs: list[Program] = []
    kinds = {c: MIX_KINDS[i % len(MIX_KINDS)] if config.workload == "mix" else config.workload
             for i, c in enumerate(config.client_names())}
    used = set(kinds.values())
    questions = tot.load_questions(config, tok, data_rng) if "tot" in used else []
    docs = qa.make_documents(config, tok, data_rng) if "qa" in used else []
    turns = multiturn.load_turns(config, tok, data_rng) if "multiturn" in used else []
    for client in config.client_names():
        kind = kinds[client]
        rate = per_client
        if config.misbehaving(client) and config.scenario == "s1" and config.workload in ("qa", "multiturn"):
            rate *= qa.S1_RATE_FACTOR
        times = gamma_arrivals(seeded_rng("arrivals", config.seed, client), rate, config.cv, config.duration)
        rng = seeded_rng("programs", config.seed, client)
        for t in times:
            pid = len(programs)
            if kind == "tot":
                q = questions[rng.randrange(len(questions))]
                programs.append(tot.make_program(config, pid, client, t, q, tok, rng))
            elif kind == "judge":
                programs.append(judge.make_program(config, pid, client, t, tok, rng))
            elif kind == "qa":
                programs.append(qa.make_program(config, pid, client, t, docs, tok, rng))
            else:
                conv = turns[rng.randrange(len(turns))]
                programs.append(multiturn.make_program(config, pid, client, t, conv, tok, rng))
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
    "DEFAULT_RATE_PER_WORKER", "MIX_KINDS", "Call", "OutputOf", "Program", "ProgramRun", "PromptOf",
    "WorkloadConfig", "call_count", "make_workload",
]
