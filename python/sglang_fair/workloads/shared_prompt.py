"""Hot prefixes: prompts that most traffic shares, the common case in production.

``sysprompt``: one system prompt shared by every client (an assistant's instructions, a popular
document); each program is a chat of one to three turns after it. S1: c0 starts conversations at 4x
the rate; S2: c0's first question is ten times as long.

``groups``: the clients come in two groups, each sharing a prompt of its own (a product's agent
instructions, a team's code base): the first three quarters of the clients (rounded up) share prompt A,
the rest prompt B; each program asks one or two questions after its group's prompt. S1: c0, in the
larger group, sends at 4x the rate. Locality routing puts each group on the workers that hold its
prompt, so fairness has to hold across workers, not only on each.

Prompts are seeded random tokens (their lengths are what matters to a scheduler); both are drawn once
per run from ``config.seed``.
"""

from __future__ import annotations

import random

from sglang_fair.workloads.config import WorkloadConfig, uniform_len
from sglang_fair.workloads.program import Call, OutputOf, Program, PromptOf
from sglang_fair.workloads.tokens import Tokenizer, random_tokens, seeded_rng

SYSTEM_PROMPT_LEN = 1536
GROUP_PROMPT_LEN = 2048
QUESTION_MEAN = 96
OUTPUT_MEAN = 160
S1_RATE_FACTOR = 4.0
S2_QUESTION_FACTOR = 10


def group_of(config: WorkloadConfig, client: str) -> int:
    """0 for the first ceil(3/4 x clients) clients, 1 for the rest (one group if there is one client)."""
    size_a = -(-3 * config.clients // 4)
    return 0 if int(client[1:]) < size_a else 1


def load_prompts(config: WorkloadConfig, tok: Tokenizer, rng: random.Random) -> tuple[tuple[int, ...], ...]:
    """The run's shared prompts: one for ``sysprompt``, two for ``groups``."""
    prompts_rng = seeded_rng("shared-prompts", config.seed)
    if config.workload == "groups":
        return tuple(random_tokens(prompts_rng, GROUP_PROMPT_LEN) for _ in range(2))
    return (random_tokens(prompts_rng, SYSTEM_PROMPT_LEN),)


def make_program(config: WorkloadConfig, pid: int, client: str, arrival: float,
                 prompts: tuple[tuple[int, ...], ...], tok: Tokenizer, rng: random.Random) -> Program:
    """A chat after the client's shared prompt: 1-3 turns (``sysprompt``) or 1-2 (``groups``)."""
    bad = config.misbehaving(client)
    grouped = config.workload == "groups"
    prompt = prompts[group_of(config, client)] if grouped else prompts[0]
    first = uniform_len(rng, QUESTION_MEAN) * (S2_QUESTION_FACTOR if bad and config.scenario == "s2" else 1)
    calls = [Call((prompt, random_tokens(rng, first)), uniform_len(rng, OUTPUT_MEAN))]
    for _ in range(rng.randrange(2 if grouped else 3)):
        prev = len(calls) - 1
        question = random_tokens(rng, uniform_len(rng, QUESTION_MEAN))
        calls.append(Call((PromptOf(prev), OutputOf(prev), question), uniform_len(rng, OUTPUT_MEAN), (prev,)))
    return Program(pid, client, arrival, tuple(calls), config.seed, bad, "e2e", config.workload)
