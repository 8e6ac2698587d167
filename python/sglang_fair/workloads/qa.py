"""Long-context QA on LooGLE (000 §6.1): many questions on the same long document; latency = TTFT.

Client ``ci`` asks about document ``i mod n`` (10 documents: longdep + shortdep), cycling through
its questions; each question is a one-call program ``template + document + question``. Output
lengths are the reference answers' lengths clipped to [4, 32] (000 Table 2: 15 on average).
S1: c0 sends at 4x the rate. S2: c0's document is two documents back to back (2x longer).
"""

from __future__ import annotations

import ast
import json
import random
from dataclasses import dataclass

from sglang_fair.workloads.config import WorkloadConfig, uniform_len, warn_missing_data
from sglang_fair.workloads.program import Call, Program
from sglang_fair.workloads.tokens import Tokenizer, random_tokens

TEMPLATE = "Answer the question using the document.\nDocument:\n"
S1_RATE_FACTOR = 4.0


@dataclass(frozen=True)
class Document:
    tokens: tuple[int, ...]
    questions: tuple[tuple[tuple[int, ...], int], ...]  # (question tokens, answer length)


def load_documents(config: WorkloadConfig, tok: Tokenizer, rng: random.Random) -> list[Document]:
    """LooGLE documents with their questions (seeded synthetic ones if the data set is absent)."""
    docs: list[Document] = []
    for name in ("longdep_qa.jsonl", "shortdep_qa.jsonl"):
        path = config.data / "loogle" / name
        if not path.exists():
            continue
        with path.open() as f:
            for line in f:
                row = json.loads(line)
                pairs = ast.literal_eval(row["qa_pairs"])
                qs = tuple(
                    (tuple(tok.encode("\nQuestion: " + str(p["Q"]))),
                     min(32, max(4, len(tok.encode(str(p["A"]))))))
                    for p in pairs
                )
                docs.append(Document(tuple(tok.encode(row["input"])), qs))
    if not docs:
        warn_missing_data(config.data / "loogle", "seeded synthetic documents")
        for _ in range(10):
            qs = tuple((random_tokens(rng, uniform_len(rng, 20)), uniform_len(rng, 15)) for _ in range(8))
            docs.append(Document(random_tokens(rng, uniform_len(rng, 20000, 0.3)), qs))
    return docs


def make_program(config: WorkloadConfig, pid: int, client: str, arrival: float, nth: int,
                 docs: list[Document], tok: Tokenizer) -> Program:
    index = int(client[1:]) if client[1:].isdigit() else 0
    doc = docs[index % len(docs)]
    bad = config.misbehaving(client)
    body = doc.tokens
    if bad and config.scenario == "s2":
        body = body + docs[(index + 1) % len(docs)].tokens
    question, answer_len = doc.questions[nth % len(doc.questions)]
    call = Call((tuple(tok.encode(TEMPLATE)), body, question), answer_len)
    return Program(pid, client, arrival, (call,), config.seed, bad, "ttft", "qa")
