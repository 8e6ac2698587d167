"""Token ids for workload text: the GPT-2 tokenizer, or a seeded mapping with ``--synthetic-data``.

The synthetic mapping splits text into GPT-2-sized pieces (a word piece of at most 4 characters with
its leading space, or one punctuation mark) and hashes each piece to an id with the seed, so equal
text gives equal ids and token counts are close to GPT-2's. Prompts are always built by
concatenating token lists, never by re-encoding joined text, so shared prefixes are exact under
either tokenizer. Random filler uses :func:`random_tokens`, generated output :func:`output_tokens`.
"""

from __future__ import annotations

import hashlib
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from sglang_fair.core.global_tree import WIDTH, pack_tokens
from sglang_fair.workloads.config import WorkloadConfig, data_file

VOCAB = 50257
_PIECE = re.compile(r" ?[A-Za-z0-9]{1,4}| ?[^\sA-Za-z0-9]|\s+")


class Tokenizer(Protocol):
    name: str

    def encode(self, text: str) -> list[int]: ...


class SyntheticTokenizer:
    """Seeded, deterministic text -> ids mapping (no dependency)."""

    def __init__(self, seed: int = 0) -> None:
        self.name = f"synthetic(seed={seed})"
        self._salt = str(seed).encode()

    def encode(self, text: str) -> list[int]:
        return [self._piece_id(p) for p in _PIECE.findall(text)]

    @lru_cache(maxsize=65536)  # noqa: B019 - pieces repeat a lot; the tokenizer lives for a run
    def _piece_id(self, piece: str) -> int:
        digest = hashlib.blake2b(piece.encode(), digest_size=8, key=self._salt).digest()
        return int.from_bytes(digest, "little") % VOCAB


class TiktokenGPT2:
    """GPT-2 BPE from the shipped ``gpt2.tiktoken`` ranks file (``tiktoken``, a base dependency)."""

    def __init__(self, ranks_file: Path) -> None:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        self.name = "gpt2(tiktoken)"
        self._enc = tiktoken.Encoding(
            name="gpt2-local",
            pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
            mergeable_ranks=load_tiktoken_bpe(str(ranks_file)),
            special_tokens={"<|endoftext|>": 50256},
        )

    def encode(self, text: str) -> list[int]:
        return list(self._enc.encode_ordinary(text))


def make_tokenizer(config: WorkloadConfig) -> Tokenizer:
    """GPT-2 from the data sets' ranks file, or the seeded synthetic mapping with ``synthetic_data``."""
    if config.synthetic_data:
        return SyntheticTokenizer(config.seed)
    return _gpt2(data_file(config, "tokenizers/gpt2.tiktoken"))


@lru_cache(maxsize=2)
def _gpt2(ranks_file: Path) -> TiktokenGPT2:
    return TiktokenGPT2(ranks_file)


def random_tokens(rng: random.Random, n: int) -> tuple[int, ...]:
    """``n`` uniformly random token ids (filler text)."""
    return tuple(x % VOCAB for x in memoryview(rng.randbytes(4 * n)).cast("I"))


_FILLER = [b""]  # the output filler, packed


def output_tokens(n: int, *parts: object) -> bytes:
    """``n`` ids standing for the text a call generates, fixed by ``parts`` (e.g. seed, program,
    call), packed (:func:`~sglang_fair.core.global_tree.pack_tokens`).

    The first id is hashed from ``parts`` to above the vocabulary (below 2^32); the rest is a filler
    every output shares. The caches compare an output only after the identical prefix before it (the
    call's prompt), where distinct first ids part two outputs at once: prefix matches are those of
    outputs distinct throughout, for one hash and a slice per call (a seeded ``random.Random`` per
    call, and a tuple and a packing of each output, had cost a tenth of a simulation)."""
    if n <= 0:
        return b""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=4).digest()
    head = (VOCAB + (int.from_bytes(digest, "little") & 0x7FFFFFFF)).to_bytes(WIDTH, "little")
    if len(_FILLER[0]) < WIDTH * (n - 1):  # grown by doubling: made a few times per process
        _FILLER[0] = pack_tokens(range(VOCAB, VOCAB + max(n - 1, 2 * len(_FILLER[0]) // WIDTH)))
    return head + _FILLER[0][: WIDTH * (n - 1)]


def seeded_rng(*parts: object) -> random.Random:
    """A generator seeded from ``parts`` (stable across processes: str seeds hash with SHA-512)."""
    return random.Random(":".join(str(p) for p in parts))
