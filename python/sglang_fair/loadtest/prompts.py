"""Prompt text for a workload call: its token ids as words, and earlier calls' real generated text.

The workloads describe prompts as token ids (literal parts, earlier prompts, earlier outputs). Over
HTTP a literal id becomes one common English word (``WORDS[id % len(WORDS)]`` with a leading space:
one token in byte-level BPE tokenizers, and never merged across the space, so two prompts that share
ids share a token prefix on the server). ``OutputOf(i)`` becomes the text call ``i`` really generated,
so a child's prompt extends its parent's prompt and answer as the server saw them.

With ``vocab`` set, prompts are token ids instead: a literal id becomes ``FIRST_ID + id % (vocab -
FIRST_ID)`` and ``OutputOf(i)`` the ids call ``i`` generated, so prompt lengths and shared prefixes are
exactly the workload's (a generated text, re-tokenized, need not give back the same tokens).
"""

from __future__ import annotations

from sglang_fair.core.errors import ConfigError
from sglang_fair.loadtest.config import FIRST_ID
from sglang_fair.workloads import OutputOf, Program, PromptOf

# Also the corpus of scripts/make_tiny_model.py, so each is one token of the tiny test model.
WORDS = (
    "the", "a", "service", "client", "request", "token", "cache", "prefix", "fair", "share",
    "queue", "light", "heavy", "model", "server", "batch", "decode", "prefill", "answer",
    "question", "system", "user", "assistant", "data", "time", "order", "first", "next", "round",
)


def ids_text(ids: tuple[int, ...]) -> str:
    return "".join(" " + WORDS[i % len(WORDS)] for i in ids)


Prompt = str | list[int]


class PromptBuilder:
    """Prompts of one program (text, or token ids below ``vocab``), given what its finished calls
    generated (text, or ids)."""

    def __init__(self, program: Program, vocab: int = 0) -> None:
        self.program = program
        self.vocab = vocab
        self.outputs: dict[int, Prompt] = {}
        self._prompts: dict[int, Prompt] = {}

    def prompt(self, call: int) -> Prompt:
        if call not in self._prompts:
            pieces: list[Prompt] = []
            for part in self.program.calls[call].parts:
                if isinstance(part, PromptOf):
                    pieces.append(self.prompt(part.call))
                elif isinstance(part, OutputOf):
                    if part.call not in self.outputs:
                        raise ConfigError(f"program {self.program.pid}: call {call} uses the output of "
                                          f"call {part.call}, which it does not wait for")
                    pieces.append(self.outputs[part.call])
                elif self.vocab:
                    pieces.append([FIRST_ID + i % (self.vocab - FIRST_ID) for i in part])
                else:
                    pieces.append(ids_text(part))
            self._prompts[call] = _join(pieces, bool(self.vocab))
        return self._prompts[call]


def _join(pieces: list[Prompt], ids: bool) -> Prompt:
    if ids:
        return [i for piece in pieces for i in piece if isinstance(i, int)]
    return "".join(p for p in pieces if isinstance(p, str))
