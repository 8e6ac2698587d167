"""Encoding a prompt from cached pieces (``gateway/token_pieces.py``) gives exactly the ids of encoding it
whole, for the byte-level BPEs it admits (GPT-2's, Llama-3's and Qwen's pre-tokenizers, trained here on
a small corpus), over randomized text; the tokenizers it refuses (Llama-2's legacy SentencePiece, an
added token that strips whitespace, one that holds a space) and cuts anywhere but a safe space break it
(the negative controls)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

from sglang_fair.gateway.token_pieces import PieceEncoder, awkward_texts, unsure_why  # noqa: E402

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
SPECIALS = ["<|user|>", "<|assistant|>", "</s>"]
WORDS = ["fair", "share", "queue", "worker", "prefix", "cache", "the", "a", "of", "token", "ünïcödé", "数字",
         "12", "345", "6789", "3.14", "don't", "it's", "!?", "...", "--", "🙂", "\t", "\n", "\n\n", "  "]


def random_text(rng: random.Random) -> str:
    joints = [" ", " ", " ", "", "  ", "\n", " \n", "\t"]
    return "".join(rng.choice(WORDS + SPECIALS[:1]) + rng.choice(joints) for _ in range(rng.randint(30, 200)))


def trained(pre: Any, normalizer: Any = None, decoder: Any = None) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None))
    if pre is not None:
        tok.pre_tokenizer = pre
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.decoder = decoder or decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet() if decoder is None else []
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS, initial_alphabet=alphabet,
                                  show_progress=False)
    rng = random.Random(7)
    tok.train_from_iterator([random_text(rng) for _ in range(300)], trainer)
    return tok


def byte_level(prefix_space: bool = False, regex: bool = False) -> Any:
    return pre_tokenizers.ByteLevel(add_prefix_space=prefix_space, use_regex=regex)


def split_then_bytes(pattern: str) -> Any:
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), "isolated"), byte_level()])


ADMITTED: dict[str, Callable[[], Tokenizer]] = {
    "gpt2": lambda: trained(byte_level(regex=True)),
    "llama3": lambda: trained(split_then_bytes(LLAMA3)),
    "qwen": lambda: trained(split_then_bytes(QWEN), normalizers.NFC()),
    "gpt2, prefix space": lambda: trained(byte_level(prefix_space=True, regex=True)),
}
REFUSED: dict[str, Callable[[], Tokenizer]] = {
    "sentencepiece, legacy": lambda: trained(  # Llama-2's: the text's spaces as a normalizer's, no pre-tokens
        None, normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
        decoders.Metaspace()),
    "added token that strips": lambda: stripping(trained(byte_level(regex=True))),
    "added token with a space": lambda: spaced(trained(byte_level(regex=True))),
}


def spaced(tok: Tokenizer) -> Tokenizer:
    tok.add_special_tokens([tokenizers.AddedToken("<mask> of", normalized=False)])
    return tok


def stripping(tok: Tokenizer) -> Tokenizer:
    tok.add_special_tokens([tokenizers.AddedToken("<mask>", rstrip=True)])
    return tok


def encoder_of(tok: Tokenizer, **kwargs: Any) -> PieceEncoder:
    return PieceEncoder(tok, lambda text: tok.encode(text, add_special_tokens=False).ids, **kwargs)


@pytest.mark.parametrize("name", sorted(ADMITTED))
def test_pieces_equal_the_whole_over_random_text(name: str) -> None:
    tok = ADMITTED[name]()
    assert unsure_why(tok) == ""
    pieces, rng = encoder_of(tok, piece_chars=32, audit_every=10**9), random.Random(1)
    texts = [random_text(rng) for _ in range(300)]
    texts += [t[:rng.randint(0, len(t))] + random_text(rng) for t in texts[:100]]  # shared beginnings
    assert pieces.check([]) == ""
    for text in texts:
        assert pieces.encode(text) == tok.encode(text, add_special_tokens=False).ids, text
    assert sum(len(pieces.cuts(t)) >= 3 for t in texts) > 0.9 * len(texts)  # the texts are cut
    assert pieces.counts["pieces cached"] > 0.5 * len(texts)  # and pieces reused
    assert pieces.counts["parts cached"] > 0.5 * len(texts)  # and parts of pieces not cached


def test_a_text_that_parts_from_another_inside_a_piece_encodes_little_more_than_its_new_text() -> None:
    tok = ADMITTED["llama3"]()
    pieces = encoder_of(tok, audit_every=10**9)
    shared = random_text(random.Random(3)) * 4
    for tail in (" and the first question?", " and another one, please."):
        before = pieces.counts["pieces encoded"]
        assert pieces.encode(shared + tail) == tok.encode(shared + tail, add_special_tokens=False).ids
    assert len(pieces.cuts(shared)) >= 8 and pieces.counts["pieces encoded"] - before <= 2


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_tokenizers_would_differ(name: str) -> None:
    """The negative control: what :func:`unsure_why` refuses, pieces would get wrong."""
    tok = REFUSED[name]()
    assert unsure_why(tok) != ""
    texts = [random_text(random.Random(i)).replace("<|user|>", "<mask> of") for i in range(20)]
    assert encoder_of(tok, piece_chars=32).check(texts).startswith("pieces differ")


def mid_word(text: str, size: int = 32) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def test_cuts_anywhere_but_a_safe_space_differ() -> None:
    """The negative control of the cut rule: fixed-width pieces (mid-word) break the ids."""
    tok = ADMITTED["llama3"]()
    pieces = encoder_of(tok, piece_chars=32)
    pieces.cuts = mid_word  # type: ignore[method-assign]
    assert pieces.check([]).startswith("pieces differ") and not pieces.on


def test_the_audit_of_neighbouring_pieces_catches_a_wrong_cut() -> None:
    """Unchecked at start-up, mid-word cuts are caught by the first audit, and the whole is served."""
    tok = ADMITTED["llama3"]()
    pieces = encoder_of(tok, audit_every=1)
    pieces.cuts = mid_word  # type: ignore[method-assign]
    text = random_text(random.Random(5))
    assert pieces.encode(text) == tok.encode(text, add_special_tokens=False).ids
    assert not pieces.on and pieces.counts["pieces off"] == 1


def test_the_audit_turns_wrong_pieces_off_and_the_whole_is_served() -> None:
    tok = ADMITTED["gpt2"]()
    pieces = encoder_of(tok, piece_chars=32, audit_every=4)
    text = " ".join(awkward_texts(n=1))
    whole = tok.encode(text, add_special_tokens=False).ids
    assert pieces.encode(text) == whole
    for piece in pieces.cache:
        pieces.cache[piece] = [0]  # a cache gone wrong
    served = [pieces.encode(text) for _ in range(3)]
    assert served[-1] == whole and served[0] != whole and not pieces.on and pieces.counts["pieces off"] == 1
    assert pieces.encode(text) == whole


def test_the_cache_keeps_at_most_its_capacity() -> None:
    tok = ADMITTED["gpt2"]()
    pieces, rng = encoder_of(tok, piece_chars=16, capacity=50), random.Random(2)
    for _ in range(40):
        pieces.encode(random_text(rng))
    assert len(pieces.cache) == 50
