"""Chatbot Arena multi-turn conversations as [1] Fig. 8 runs them (four clients, c2 and c3 heavy).

Arrival times are the real chat.lmsys.org (Chatbot Arena) request times of the VTC trace
(the package's ``data/vtc_lmsys/real_trace.csv``: 1,500 requests over 600 s), divided by ``time_scale``
([1] §6.1: "re-scale the request time stamps ... and aggregate multiple clients' requests") and
replayed again from the start for as long as ``duration`` lasts, so arrivals never stop early.
Each arrival starts a conversation of one of the clients, drawn (seeded) in proportion to the
clients' current rate: 1 for every client, except c2 and c3 which send ``HEAVY_FACTOR`` times as
much, c2 only during the first half of ``duration`` (Fig. 8: "Client 2 returns to normal midway").
A conversation has ``TURNS`` turns (MT-bench's and Arena's two-turn format): turn 1 is
system prompt + user message, turn t+1 is turn t's prompt + its answer + the next message, sent
when turn t finishes. Message and answer lengths are the trace's (prompt_len, output_len) pairs, in
trace order (messages are random tokens: the trace has no text). Their means (136 / 256 tokens)
are above [1] Table 2's (56 / 142), which came from the Arena conversations data set that is not
available here. c2 and c3 are marked misbehaving (their latency is left out of the well-behaved
figures).
"""

from __future__ import annotations

import csv
import random

from sglang_fair.workloads.config import WorkloadConfig, data_file, uniform_len
from sglang_fair.workloads.multiturn import SYSTEM
from sglang_fair.workloads.program import Call, OutputOf, Program, PromptOf
from sglang_fair.workloads.tokens import Tokenizer, random_tokens, seeded_rng

TRACE = "vtc_lmsys/real_trace.csv"
HEAVY = ("c2", "c3")
HEAVY_FACTOR = 4.0
TURNS = 2


def load_trace_rows(config: WorkloadConfig) -> tuple[list[float], list[tuple[int, int]]]:
    """Request times (seconds from the first) and (prompt_len, output_len) pairs of the trace."""
    if config.synthetic_data:  # a seeded Poisson stream with Table 2's mean lengths
        rng = seeded_rng("arena-fallback", config.seed)
        times, t = [], 0.0
        while t < 600.0:
            times.append(t)
            t += rng.expovariate(2.5)
        return times, [(uniform_len(rng, 56), uniform_len(rng, 142)) for _ in times]
    with data_file(config, TRACE).open() as f:
        rows = sorted(csv.DictReader(f), key=lambda r: float(r["req_time"]))
    t0 = float(rows[0]["req_time"])
    return ([float(r["req_time"]) - t0 for r in rows],
            [(max(1, int(r["prompt_len"])), max(1, int(r["output_len"]))) for r in rows])


def rate_factor(config: WorkloadConfig, client: str, t: float) -> float:
    """The client's relative rate at time ``t`` (Fig. 8's pattern)."""
    if client == "c3" or (client == "c2" and t < config.duration / 2):
        return HEAVY_FACTOR
    return 1.0


def arrivals(config: WorkloadConfig, times: list[float]) -> list[tuple[float, int]]:
    """(arrival, trace row) for every replayed request before ``duration``."""
    period = max(times[-1], 1e-9) + (times[-1] - times[0]) / max(1, len(times) - 1)
    out: list[tuple[float, int]] = []
    rep = 0
    while True:
        for i, t in enumerate(times):
            a = (t + rep * period) / config.time_scale
            if a >= config.duration:
                return out
            out.append((a, i))
        rep += 1


def make_programs(config: WorkloadConfig, tok: Tokenizer) -> list[Program]:
    """Every conversation of the run (pids in arrival order, to be renumbered by the caller)."""
    times, lengths = load_trace_rows(config)
    clients = config.client_names()
    pick = seeded_rng("arena-clients", config.seed)
    system = tuple(tok.encode(SYSTEM))
    programs: list[Program] = []
    for a, row in arrivals(config, times):
        client = pick.choices(clients, [rate_factor(config, c, a) for c in clients])[0]
        rng = seeded_rng("arena-conv", config.seed, len(programs))
        programs.append(_conversation(config, len(programs), client, a, system, lengths, row, rng))
    return programs


def _conversation(config: WorkloadConfig, pid: int, client: str, arrival: float, system: tuple[int, ...],
                  lengths: list[tuple[int, int]], row: int, rng: random.Random) -> Program:
    calls: list[Call] = []
    for turn in range(TURNS):
        msg_len, out_len = lengths[(row + turn) % len(lengths)]
        msg = random_tokens(rng, msg_len)
        if turn == 0:
            calls.append(Call((system, msg), out_len))
        else:
            prev = turn - 1
            calls.append(Call((PromptOf(prev), OutputOf(prev), msg), out_len, (prev,)))
    return Program(pid, client, arrival, tuple(calls), config.seed, client in HEAVY, "e2e", "arena")
