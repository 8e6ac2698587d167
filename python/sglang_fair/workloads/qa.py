"""Long-context QA over a LooGLE-like document set ([1] §6.1, Table 2); latency = TTFT.

The set has ``config.documents`` documents (default 200), many times what one GPU's KV pool holds,
so that which worker holds which document, and in what order questions are served, decides the hit
rate. Document k is a header naming it ("Document k") followed by the text of a LooGLE document
drawn (seeded) from the sample in the package's ``data/loogle`` (longdep + shortdep, duplicates removed):
lengths follow the sample's empirical distribution (11K-26K GPT-2 tokens, mean ~17.5K; the full
LooGLE set averages 21,449 Llama tokens, [1] Table 2), and the header makes every document a
distinct prefix. Documents are dealt to clients round robin (client i owns k = i, i + C, ...);
each program is one call ``template + document + question`` on one of the client's documents,
chosen uniformly, with a real LooGLE question of the source document; its output length is the
reference answer's, clipped to [4, 32] (Table 2: 15 on average). S1: c0 sends at 4x the rate. S2:
c0's document is followed by the next document (2x longer input).
"""

from __future__ import annotations

import ast
import json
import random
from dataclasses import dataclass

from sglang_fair.workloads.config import WorkloadConfig, data_file, uniform_len
from sglang_fair.workloads.program import Call, Part, Program
from sglang_fair.workloads.tokens import Tokenizer, random_tokens

TEMPLATE = "Answer the question using the document.\n"
S1_RATE_FACTOR = 4.0
ANSWER_CLIP = (4, 32)


@dataclass(frozen=True)
class Source:
    """One LooGLE document: its tokens and its questions (question tokens, answer length)."""

    tokens: tuple[int, ...]
    questions: tuple[tuple[tuple[int, ...], int], ...]


@dataclass(frozen=True)
class Document:
    """Document k of the set: its header and the source it repeats (shared tuples, no copy)."""

    header: tuple[int, ...]
    source: Source

    def __len__(self) -> int:
        return len(self.header) + len(self.source.tokens)


def load_sources(config: WorkloadConfig, tok: Tokenizer, rng: random.Random) -> list[Source]:
    """The LooGLE sample's distinct documents (seeded synthetic ones with ``config.synthetic_data``)."""
    if config.synthetic_data:
        return [Source(random_tokens(rng, uniform_len(rng, 17500, 0.4)), _synthetic_questions(rng))
                for _ in range(9)]
    seen: dict[str, Source] = {}
    lo, hi = ANSWER_CLIP
    for name in ("longdep_qa.jsonl", "shortdep_qa.jsonl"):
        with data_file(config, f"loogle/{name}").open() as f:
            for line in f:
                row = json.loads(line)
                qs = tuple(
                    (tuple(tok.encode("\nQuestion: " + str(p["Q"]))),
                     min(hi, max(lo, len(tok.encode(str(p["A"]))))))
                    for p in ast.literal_eval(row["qa_pairs"])
                )
                old = seen.get(row["input"])
                if old is None:
                    seen[row["input"]] = Source(tuple(tok.encode(row["input"])), qs)
                else:
                    seen[row["input"]] = Source(old.tokens, old.questions + qs)
    return list(seen.values())


def _synthetic_questions(rng: random.Random) -> tuple[tuple[tuple[int, ...], int], ...]:
    return tuple((random_tokens(rng, uniform_len(rng, 20)), uniform_len(rng, 15)) for _ in range(8))


def make_documents(config: WorkloadConfig, tok: Tokenizer, rng: random.Random) -> list[Document]:
    """The document set: ``config.documents`` documents, each a header + a LooGLE source drawn with
    ``rng`` (each source once per round, in a shuffled order, so the set's lengths follow the
    sample's as closely as its size allows)."""
    sources = load_sources(config, tok, rng)
    docs: list[Document] = []
    while len(docs) < config.documents:
        order = list(range(len(sources)))
        rng.shuffle(order)
        for i in order[: config.documents - len(docs)]:
            docs.append(Document(tuple(tok.encode(f"Document {len(docs)}:\n")), sources[i]))
    return docs


def make_program(config: WorkloadConfig, pid: int, client: str, arrival: float, docs: list[Document],
                 tok: Tokenizer, rng: random.Random) -> Program:
    index = int(client[1:]) if client[1:].isdigit() else 0
    owned = range(index % config.clients, len(docs), config.clients)
    k = owned[rng.randrange(len(owned))] if owned else rng.randrange(len(docs))
    doc = docs[k]
    bad = config.misbehaving(client)
    parts: list[Part] = [tuple(tok.encode(TEMPLATE)), doc.header, doc.source.tokens]
    if bad and config.scenario == "s2":
        nxt = docs[(k + 1) % len(docs)]
        parts += [nxt.header, nxt.source.tokens]
    question, answer_len = doc.source.questions[rng.randrange(len(doc.source.questions))]
    call = Call((*parts, question), answer_len)
    return Program(pid, client, arrival, (call,), config.seed, bad, "ttft", "qa")
