"""Write a tokenizer directory with GPT-2's real vocabulary (50,257 tokens) and a ChatML chat template,
offline, for measuring the gateway's own tokenizer at a real model's characters per token.

    python scripts/make_gpt2_tokenizer.py OUT_DIR [--ranks GPT2_TIKTOKEN]

The ranks are GPT-2's BPE in tiktoken's format; by default the copy the package ships for its workloads
(``python/sglang_fair/data/tokenizers/gpt2.tiktoken``, MIT, see its ``MANIFEST.md``). The directory holds
a tokenizer only (no model): ``sglang-fair lab gateway-speed --tokenizer OUT_DIR`` needs no more. Needs
``transformers``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "python/sglang_fair/data/tokenizers/gpt2.tiktoken"
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
          "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the directory to write")
    parser.add_argument("--ranks", type=Path, default=SHIPPED, help="GPT-2's ranks (gpt2.tiktoken)")
    args = parser.parse_args()
    if not args.ranks.is_file():
        parser.error(f"--ranks {args.ranks}: no such file")
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    converter = TikTokenConverter(vocab_file=str(args.ranks), pattern=GPT2_PATTERN,
                                  extra_special_tokens=SPECIALS)
    backend = converter.converted()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=SPECIALS[0],
                                        pad_token=SPECIALS[0], additional_special_tokens=SPECIALS[1:])
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(args.out)
    ids = tokenizer.encode("Hello world<|endoftext|>")
    print(f"{args.out}: vocabulary {len(tokenizer)}, 'Hello world<|endoftext|>' -> {ids}")
    return 0 if ids == [15496, 995, 50256] else 1  # GPT-2's own ids


if __name__ == "__main__":
    sys.exit(main())
