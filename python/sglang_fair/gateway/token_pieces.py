"""A prompt's ids from cached pieces: text shared with earlier prompts (a system prompt, a document, an
agent's history) is encoded once, and a prompt costs the encoding of what is new in it.

:class:`PieceEncoder` cuts a text at *safe* positions: a space whose previous character is not
whitespace, the first after every ``piece_chars`` characters (counted from the previous cut, so two
texts that share a beginning are cut alike up to where they part). For a byte-level BPE whose
pre-tokenizer splits by a GPT-2-, Llama-3- or Qwen-style regex, no pre-token crosses such a space: every
alternative that matches a non-space stops before a space, and the one lookahead (``\\s+(?!\\S)``) only
covers whitespace. BPE merges within a pre-token, so the ids of the text are the ids of its pieces, one
after another (a prefix space, where the pre-tokenizer adds one, goes to the first piece only: the others
begin with a space). :func:`unsure_why` admits only such tokenizers (no normalizer but NFC, which leaves a
space and its neighbour alone; no added token that strips, needs a whole word or holds a space);
:meth:`check` then compares pieces against the whole on a corpus of awkward text, and in one call of
:meth:`encode` in ``audit_every`` two neighbouring pieces (a different pair each time) are encoded whole
and compared with their ids from pieces; the pieces turn off at the first difference (counted, in the
log). A piece not in the cache is cut again, ``FINER`` times finer, and only its parts not in the cache
are encoded: a prompt that parts from an earlier one inside a piece pays for little more than its new
text. The pieces and parts of the recent texts are kept in one LRU of ``capacity`` entries.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("sglang_fair.gateway")

PIECE_CHARS = 128
FINER = 4
CAPACITY = 16384
AUDIT_EVERY = 64
SAFE_NORMALIZERS = (None, "NFC")
STRIPPING = ("lstrip", "rstrip", "single_word")


def unsure_why(backend: Any) -> str:
    """Why the ``tokenizers.Tokenizer`` ``backend`` is not one whose pieces are safe ('' if it is)."""
    spec = json.loads(backend.to_str())
    normalizer = (spec.get("normalizer") or {}).get("type")
    if normalizer not in SAFE_NORMALIZERS:
        return f"normalizer {normalizer}"
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = [step.get("type") for step in steps]
    if not kinds or kinds[-1] != "ByteLevel" or set(kinds[:-1]) - {"Split"}:
        return f"pre-tokenizer {'+'.join(str(k) for k in kinds)}"
    added = spec.get("added_tokens", [])
    if any(token.get(flag) for token in added for flag in STRIPPING):
        return "an added token strips whitespace or needs a whole word"
    if any(" " in token.get("content", "") for token in added):
        return "an added token holds a space (a cut could split it)"
    return ""


class PieceEncoder:
    """``encode(text)``: the ids ``whole(text)`` gives, from cached pieces (see the module's doc)."""

    def __init__(self, backend: Any, whole: Callable[[str], list[int]], piece_chars: int = PIECE_CHARS,
                 capacity: int = CAPACITY, audit_every: int = AUDIT_EVERY) -> None:
        self.backend, self.whole = backend, whole
        self.piece_chars, self.capacity, self.audit_every = piece_chars, capacity, audit_every
        self.cache: OrderedDict[str, list[int]] = OrderedDict()
        self.counts: Counter[str] = Counter()
        self.on = True

    def encode(self, text: str) -> list[int]:
        if not self.on:
            return self.whole(text)
        self.counts["texts"] += 1
        pieces = self.cuts(text)
        ids = self._ids(pieces)
        if self.counts["texts"] % self.audit_every == 0 and (why := self._audit(pieces)):
            self._off(*why)
            return self.whole(text)
        return ids

    def check(self, texts: list[str]) -> str:
        """Compare pieces with the whole on ``texts`` and the built-in corpus: '' if equal, else why not
        (and the pieces are off)."""
        for text in [*texts, *awkward_texts()]:
            if (ids := self._ids(self.cuts(text))) != (want := self.whole(text)):
                return self._off(text, ids, want)
        self.cache.clear()
        self.counts.clear()
        return ""

    def cuts(self, text: str, size: int = 0) -> list[str]:
        """``text`` cut at its safe spaces, about ``size`` (default ``piece_chars``) apart."""
        pieces, start, size = [], 0, size or self.piece_chars
        while len(text) - start > size:
            cut = text.find(" ", start + size)
            while cut > 0 and text[cut - 1].isspace():
                cut = text.find(" ", cut + 1)
            if cut <= 0:
                break
            pieces.append(text[start:cut])
            start = cut
        pieces.append(text[start:])
        return pieces

    def _ids(self, pieces: list[str]) -> list[int]:
        return self._joined(pieces, self._finer, "pieces cached")

    def _joined(self, pieces: list[str], encode: Callable[[list[str]], list[list[int]]],
                hits: str) -> list[int]:
        """The ids of ``pieces`` one after another: cached (counted in ``hits``), or ``encode``-d and
        cached."""
        found = [self.cache.get(piece) for piece in pieces]
        missing = [piece for piece, ids in zip(pieces, found, strict=True) if ids is None]
        fresh = dict(zip(missing, encode(missing), strict=True)) if missing else {}
        ids: list[int] = []
        for piece, hit in zip(pieces, found, strict=True):
            if hit is None:
                hit = self.cache[piece] = fresh[piece]
            else:
                self.cache.move_to_end(piece)
                self.counts[hits] += 1
            ids += hit
        while len(self.cache) > self.capacity:
            self.cache.popitem(last=False)
        return ids

    def _finer(self, pieces: list[str]) -> list[list[int]]:
        """The ids of pieces not cached, from parts ``FINER`` times shorter (what they share with earlier
        text is in the cache: only the new part is encoded)."""
        return [self._joined(self.cuts(piece, self.piece_chars // FINER), self._encoded, "parts cached")
                for piece in pieces]

    def _encoded(self, pieces: list[str]) -> list[list[int]]:
        self.counts["pieces encoded"] += len(pieces)
        encode = self.backend.encode  # one call a part: 13 us hot against 17 for a batch of one
        return [encode(piece, add_special_tokens=False).ids for piece in pieces]

    def _audit(self, pieces: list[str]) -> tuple[str, list[int], list[int]] | None:
        """Two neighbouring pieces (a different pair each time) from the cache against the two encoded
        whole: where they differ, their text, the ids from pieces and the whole's."""
        at = (self.counts["texts"] // self.audit_every) % max(1, len(pieces) - 1)
        pair = pieces[at:at + 2]
        ids = self._ids(pair)
        return None if (want := self.whole("".join(pair))) == ids else ("".join(pair), ids, want)

    def _off(self, text: str, ids: list[int], want: list[int]) -> str:
        pairs = enumerate(zip(ids, want, strict=False))
        at = next((i for i, (a, b) in pairs if a != b), min(len(ids), len(want)))
        why = f"pieces differ from the whole at token {at} of {len(want)} ({text[:60]!r}...): pieces off"
        self.on = False
        self.cache.clear()
        self.counts["pieces off"] += 1
        logger.warning("gateway: local tokenizer %s", why)
        return why

    def view(self) -> dict[str, Any]:
        return {"pieces": "on" if self.on else "off", "cached pieces": len(self.cache), **dict(self.counts)}


def awkward_texts(seed: int = 0, n: int = 64) -> list[str]:
    """Text whose pieces a tokenizer may get wrong: runs of spaces, tabs and newlines, digits, contractions,
    punctuation, scripts without spaces, emoji; long enough to be cut many times."""
    rng = random.Random(seed)
    parts = ["the", "fair", "share", " ", "  ", "\t", "\n", "\n\n", "12345", "3.14", "'s", "'ll",
             "don't", "!!", "...", "--", "ünïcödé", "数字と文字", "🙂", "<|user|>", "</s>", "x" * 40,
             "-\u0301", "\u00a0"]
    return ["".join(rng.choice(parts) + rng.choice(["", " "]) for _ in range(rng.randint(40, 160)))
            for _ in range(n)]
