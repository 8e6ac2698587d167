"""LLM-as-a-Judge with branch-solve-merge ([1] §6.1, Fig. 6) over a synthetic article.

D dimension calls run in parallel on the same article (prompt: template + article + dimension
instruction), then a merge call reads the article and the D verdicts. S1: c0 judges 8x the
dimensions (2 vs 16, Table 3). S2: c0 puts 600 extra tokens before each article.
"""

from __future__ import annotations

import random

from sglang_fair.workloads.config import WorkloadConfig, uniform_len
from sglang_fair.workloads.program import Call, OutputOf, Part, Program
from sglang_fair.workloads.tokens import Tokenizer, random_tokens

TEMPLATE = "You are an expert reviewer. Read the article below and judge it.\nArticle:\n"
ARTICLE_MEAN = 2600  # with template and instruction, about [1] Table 2's 2,701-token prefix
OUTPUT_MEAN = 256
S2_EXTRA = 600


def make_program(config: WorkloadConfig, pid: int, client: str, arrival: float,
                 tok: Tokenizer, rng: random.Random) -> Program:
    bad = config.misbehaving(client)
    dims = config.dimensions * 8 if bad and config.scenario == "s1" else config.dimensions
    article = random_tokens(rng, uniform_len(rng, ARTICLE_MEAN, 0.3))
    if bad and config.scenario == "s2":
        article = random_tokens(rng, S2_EXTRA) + article
    head = (tuple(tok.encode(TEMPLATE)), article)
    calls = [
        Call((*head, tuple(tok.encode(f"\nJudge the article on dimension {d + 1} of {dims}:"))),
             uniform_len(rng, OUTPUT_MEAN))
        for d in range(dims)
    ]
    merge: list[Part] = [*head, tuple(tok.encode("\nVerdicts:"))]
    merge += [OutputOf(d) for d in range(dims)]
    merge.append(tuple(tok.encode("\nMerge the verdicts into one score:")))
    calls.append(Call(tuple(merge), uniform_len(rng, OUTPUT_MEAN), tuple(range(dims))))
    return Program(pid, client, arrival, tuple(calls), config.seed, bad, "e2e", "judge")
