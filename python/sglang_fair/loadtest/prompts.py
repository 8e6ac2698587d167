"""Prompt text for a workload call: its token ids as words, and earlier calls' real generated text.

The workloads describe prompts as token ids (literal parts, earlier prompts, earlier outputs). Over
HTTP a literal id becomes one common English word (``WORDS[id % len(WORDS)]`` with a leading space:
one token in byte-level BPE tokenizers, and never merged across the space, so two prompts that share
ids share a token prefix on the server). ``OutputOf(i)`` becomes the text call ``i`` really generated,
so a child's prompt extends its parent's prompt and answer as the server saw them.
"""

from __future__ import annotations

from sglang_fair.core.errors import ConfigError
from sglang_fair.workloads import OutputOf, Program, PromptOf

# Also the corpus of scripts/make_tiny_model.py, so each is one token of the tiny test model.
WORDS = (
    "the", "a", "service", "client", "request", "token", "cache", "prefix", "fair", "share",
    "queue", "light", "heavy", "model", "server", "batch", "decode", "prefill", "answer",
    "question", "system", "user", "assistant", "data", "time", "order", "first", "next", "round",
)


def ids_text(ids: tuple[int, ...]) -> str:
    return "".join(" " + WORDS[i % len(WORDS)] for i in ids)


class PromptBuilder:
    """Prompt texts of one program, given the texts its finished calls generated."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.outputs: dict[int, str] = {}
        self._prompts: dict[int, str] = {}

    def prompt(self, call: int) -> str:
        if call not in self._prompts:
            pieces = []
            for part in self.program.calls[call].parts:
                if isinstance(part, PromptOf):
                    pieces.append(self.prompt(part.call))
                elif isinstance(part, OutputOf):
                    if part.call not in self.outputs:
                        raise ConfigError(f"program {self.program.pid}: call {call} uses the output of "
                                          f"call {part.call}, which it does not wait for")
                    pieces.append(self.outputs[part.call])
                else:
                    pieces.append(ids_text(part))
            self._prompts[call] = "".join(pieces)
        return self._prompts[call]
