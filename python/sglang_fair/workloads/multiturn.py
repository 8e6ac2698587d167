"""MT-bench two-turn conversations (the second turn extends the first turn's prompt and answer).

S1: c0 starts conversations at 4x the rate; S2: c0's first question is repeated 10 times.
The Mooncake and VTC LMSYS traces are replayed by :mod:`sglang_fair.workloads.trace`.
"""

from __future__ import annotations

import json
import random

from sglang_fair.workloads.config import WorkloadConfig, data_file, uniform_len
from sglang_fair.workloads.program import Call, OutputOf, Program, PromptOf
from sglang_fair.workloads.tokens import Tokenizer, random_tokens

SYSTEM = "A chat between a curious user and an artificial intelligence assistant.\nUSER: "
OUTPUT_MEAN = 142  # [1] Table 2, real multi-turn
S1_RATE_FACTOR = 4.0


Conversation = tuple[tuple[int, ...], ...]


def load_turns(config: WorkloadConfig, tok: Tokenizer, rng: random.Random) -> list[Conversation]:
    """MT-bench's two-turn conversations as token tuples (synthetic ones with ``config.synthetic_data``)."""
    if config.synthetic_data:
        return [tuple(random_tokens(rng, uniform_len(rng, 60)) for _ in range(2)) for _ in range(80)]
    with data_file(config, "fastchat/mt_bench_question.jsonl").open() as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [tuple(tuple(tok.encode(t)) for t in row["turns"]) for row in rows]


def make_program(config: WorkloadConfig, pid: int, client: str, arrival: float,
                 turns: Conversation, tok: Tokenizer, rng: random.Random) -> Program:
    bad = config.misbehaving(client)
    first = turns[0] * 10 if bad and config.scenario == "s2" else turns[0]
    calls = [Call((tuple(tok.encode(SYSTEM)), first), uniform_len(rng, OUTPUT_MEAN))]
    for t in turns[1:]:
        prev = len(calls) - 1
        calls.append(Call((PromptOf(prev), OutputOf(prev), t), uniform_len(rng, OUTPUT_MEAN), (prev,)))
    return Program(pid, client, arrival, tuple(calls), config.seed, bad, "e2e", "multiturn")
