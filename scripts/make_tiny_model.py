"""Build a tiny random-weight Llama and its tokenizer offline, for CPU end-to-end tests.

    python scripts/make_tiny_model.py OUT_DIR [--seed 0]

The tokenizer is a byte-level BPE trained on a few generated sentences (no download), wrapped in
``PreTrainedTokenizerFast`` with a chat template; the model is ``LlamaConfig`` with hidden size 64,
2 layers, 4 heads, 2 KV heads, float32. Needs ``torch``, ``transformers`` and ``tokenizers``.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

WORDS = [
    "the", "a", "service", "client", "request", "token", "cache", "prefix", "fair", "share",
    "queue", "light", "heavy", "model", "server", "batch", "decode", "prefill", "answer",
    "question", "system", "user", "assistant", "data", "time", "order", "first", "next", "round",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def corpus(seed: int, n: int = 2000) -> list[str]:
    """Random sentences over a small vocabulary (deterministic for ``seed``)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 16))) + "." for _ in range(n)]


def build_tokenizer(out: Path, seed: int) -> int:
    """Train and save the tokenizer; return its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    trainer_cls: Any = trainers.BpeTrainer  # the tokenizers/transformers classes are untyped
    fast_cls: Any = PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    trainer = trainer_cls(
        vocab_size=512, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    fast = fast_cls(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return len(fast)


def build_model(out: Path, vocab_size: int, seed: int, context: int = 8192) -> None:
    """Save a random-weight float32 Llama with ``vocab_size`` tokens and a ``context``-token window."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config_cls: Any = LlamaConfig
    model_cls: Any = LlamaForCausalLM
    config = config_cls(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
        bos_token_id=1, eos_token_id=2, pad_token_id=2, torch_dtype="float32",
    )
    model = model_cls(config).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context", type=int, default=8192, help="context length (max_position_embeddings)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(args.out, args.seed)
    build_model(args.out, vocab, args.seed, args.context)
    print(f"tiny llama (vocab {vocab}) written to {args.out}")


if __name__ == "__main__":
    main()
