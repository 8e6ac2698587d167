"""Tree-of-Thoughts on GSM8K (000 §6.1, Fig. 6): a tree of height ``depth`` with B branches.

Every node's prompt is its parent's prompt + the parent's output + a step instruction; siblings
share their whole prompt (they are samples of the same prompt, SGLang's ``fork``), and a child starts
only when its parent finishes. S1: c0 grows trees of 2B branches (B=2: 31 calls vs 341 calls at
B=4, as Table 3). S2: c0's question is repeated 10 times (10x longer input).
"""

from __future__ import annotations

import json
import random

from sglang_fair.workloads.config import WorkloadConfig, uniform_len, warn_missing_data
from sglang_fair.workloads.program import Call, OutputOf, Part, Program, PromptOf
from sglang_fair.workloads.tokens import Tokenizer, random_tokens

TEMPLATE = (
    "You are solving a grade-school math problem step by step. Propose the next reasoning step, "
    "then state the partial result. Question: "
)
STEP = "\nEvaluate the reasoning so far and continue with the next step:"
OUTPUT_MEAN = 256  # 000 Table 2: average output length 256


def load_questions(config: WorkloadConfig, tok: Tokenizer, rng: random.Random) -> list[tuple[int, ...]]:
    """GSM8K questions as token tuples (seeded synthetic questions if the data set is absent)."""
    path = config.data / "gsm8k" / "test.jsonl"
    if path.exists():
        with path.open() as f:
            return [tuple(tok.encode(json.loads(line)["question"])) for line in f if line.strip()]
    warn_missing_data(path, "seeded synthetic questions")
    return [random_tokens(rng, uniform_len(rng, 50)) for _ in range(200)]


def tree_calls(question: tuple[int, ...], template: tuple[int, ...], step: tuple[int, ...],
               branches: int, depth: int, rng: random.Random) -> tuple[Call, ...]:
    """Calls of one tree, parents before children (breadth first)."""
    calls: list[Call] = [Call((template, question), uniform_len(rng, OUTPUT_MEAN))]
    level = [0]
    for _ in range(depth):
        nxt: list[int] = []
        for parent in level:
            for _ in range(branches):
                parts: tuple[Part, ...] = (PromptOf(parent), OutputOf(parent), step)
                calls.append(Call(parts, uniform_len(rng, OUTPUT_MEAN), (parent,)))
                nxt.append(len(calls) - 1)
        level = nxt
    return tuple(calls)


def make_program(config: WorkloadConfig, pid: int, client: str, arrival: float,
                 question: tuple[int, ...], tok: Tokenizer, rng: random.Random) -> Program:
    bad = config.misbehaving(client)
    branches = config.branches * 2 if bad and config.scenario == "s1" else config.branches
    if bad and config.scenario == "s2":
        question = question * 10
    calls = tree_calls(question, tuple(tok.encode(TEMPLATE)), tuple(tok.encode(STEP)),
                       branches, config.depth, rng)
    return Program(pid, client, arrival, calls, config.seed, bad, "e2e", "tot")
