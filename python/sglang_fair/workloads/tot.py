"""Tree-of-Thoughts on GSM8K as SGLang's ``tree_of_thought_deep`` benchmark runs it ([1] §6.1, Fig. 6).

The program forks at the root: the question prompt (level 1 instruction + question) is sampled B
times (B plan calls, siblings with one shared prompt, SGLang's ``fork``); every call of level l+1
extends its parent's prompt with the parent's output and the level's instruction, and is sampled B
times again. Four levels (plan, execute, reflect, final answer), so a tree has B + B² + B³ + B⁴
calls: 30 at B = 2 and 340 at B = 4, [1] Table 3's counts. A child starts only when its parent
finishes. S1: c0 grows trees of 2B branches (30 vs 340 calls). S2: c0's question is repeated 10
times (10x longer input). ``depth`` is the number of levels (the instructions repeat past four).
"""

from __future__ import annotations

import json
import random

from sglang_fair.workloads.config import WorkloadConfig, data_file, uniform_len
from sglang_fair.workloads.program import Call, OutputOf, Part, Program, PromptOf
from sglang_fair.workloads.tokens import Tokenizer, random_tokens

# One instruction per level, in the order of SGLang's benchmark (our wording, similar lengths).
LEVELS = (
    "Make a high-level plan for the question below: name the method and the idea you will use, "
    "restate what is given if it helps, but do not calculate yet. Keep it under 80 words. Question: ",
    "\nThe plan is good. Now carry it out with the real numbers, step by step, and state the final "
    "answer briefly.",
    "\nNow check your own solution rigorously and rate its correctness from 1 to 5.",
    "\nGiven that check, would you change anything? Give the final answer after careful thought.",
)
OUTPUT_MEAN = 256  # [1] Table 2: average output length 256 (SGLang's benchmark: max_tokens=256)


def load_questions(config: WorkloadConfig, tok: Tokenizer, rng: random.Random) -> list[tuple[int, ...]]:
    """GSM8K questions as token tuples (seeded synthetic ones with ``config.synthetic_data``)."""
    if config.synthetic_data:
        return [random_tokens(rng, uniform_len(rng, 50)) for _ in range(200)]
    with data_file(config, "gsm8k/test.jsonl").open() as f:
        return [tuple(tok.encode(json.loads(line)["question"])) for line in f if line.strip()]


def tree_calls(question: tuple[int, ...], levels: list[tuple[int, ...]], branches: int, depth: int,
               rng: random.Random) -> tuple[Call, ...]:
    """Calls of one tree, level by level (parents before children): sum of branches**l, l = 1..depth."""
    calls: list[Call] = []
    level: list[int | None] = [None]  # the root is the question prompt itself, not a call
    for lv in range(depth):
        step = levels[lv % len(levels)]
        nxt: list[int] = []
        for parent in level:
            parts: tuple[Part, ...] = (
                (step, question) if parent is None else (PromptOf(parent), OutputOf(parent), step))
            deps = () if parent is None else (parent,)
            for _ in range(branches):
                calls.append(Call(parts, uniform_len(rng, OUTPUT_MEAN), deps))
                nxt.append(len(calls) - 1)
        level = list(nxt)
    return tuple(calls)


_ENCODED: list[tuple[Tokenizer, list[tuple[int, ...]]]] = []  # the last tokenizer's levels


def _levels(tok: Tokenizer) -> list[tuple[int, ...]]:
    """The level instructions encoded once per tokenizer: every program shares the same tuples."""
    if not _ENCODED or _ENCODED[0][0] is not tok:
        _ENCODED[:] = [(tok, [tuple(tok.encode(text)) for text in LEVELS])]
    return _ENCODED[0][1]


def make_program(config: WorkloadConfig, pid: int, client: str, arrival: float,
                 question: tuple[int, ...], tok: Tokenizer, rng: random.Random) -> Program:
    bad = config.misbehaving(client)
    branches = config.branches * 2 if bad and config.scenario == "s1" else config.branches
    if bad and config.scenario == "s2":
        question = question * 10
    levels = _levels(tok)
    calls = tree_calls(question, levels, branches, config.depth, rng)
    return Program(pid, client, arrival, calls, config.seed, bad, "e2e", "tot")
