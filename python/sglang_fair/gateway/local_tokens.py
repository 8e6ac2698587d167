"""The prompt's token ids in the gateway itself, without the ``/tokenize`` round trip, where it is sure
(``--tokenizer PATH``: the servers' model or tokenizer directory, readable here).

:class:`LocalTokenizer` loads the tokenizer and its chat template with ``transformers`` (the
``gateway-tokenizer`` extra; SGLang's own loader) and gives ids only for the request shapes whose
rendering it mirrors from SGLang 0.5.23 (``serving_chat._apply_jinja_template``, default path): a
prompt string (``tokenizer.encode``, as ``/tokenize`` encodes one), and a chat whose messages are only
``role`` (system, user, assistant; not last) and string ``content``, with no field that changes the
rendering (tools, ``tool_choice``, ``chat_template_kwargs``, ``reasoning_effort``,
``continue_final_message``, ...: anything not in :data:`CHAT_FIELDS`), rendered with
``add_generation_prompt`` and encoded as SGLang encodes a rendered template. For every other shape it
gives None and the gateway asks a server's ``/tokenize``, counted per reason (``/gateway/state``).

It is trusted only after :meth:`verify`: at start-up the gateway tokenizes :data:`PROBES` (multi-turn,
system prompts, text that looks like the template's own markers, completions) itself and through a
server's ``/tokenize``; one difference (a server with its own ``--chat-template`` or template
arguments, another tokenizer, another SGLang) and every request goes to ``/tokenize``, with the
difference in the log and in the state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from sglang_fair.core.errors import ConfigError

CHAT_FIELDS = frozenset({  # a chat's fields that do not change its prompt's rendering in SGLang 0.5.23
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
    "n", "stop", "stop_token_ids", "seed", "user", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "logprobs", "top_logprobs", "min_tokens", "ignore_eos", "skip_special_tokens",
    "no_stop_trim", "rid"})
ROLES = frozenset({"system", "user", "assistant"})
PROBES: tuple[dict[str, Any], ...] = (
    {"messages": [{"role": "user", "content": "hello"}]},
    {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi, you?"}]},
    {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "a question"},
                  {"role": "assistant", "content": "an answer\n\twith  spaces"},
                  {"role": "user", "content": "<|user|> not a marker </s> ünïcödé 数字 🙂"}]},
    {"messages": [{"role": "user", "content": ""}]},
    {"prompt": "a plain completion prompt"},
    {"prompt": " leading space, trailing newline\n"},
)


class LocalTokenizer:
    """A tokenizer and chat template loaded from ``path``; :meth:`ids` of the shapes it is sure of."""

    def __init__(self, path: str) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError as err:
            raise ConfigError(f"--tokenizer needs transformers ({err}): pip install "
                              "'sglang-fair[gateway-tokenizer]'") from None
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError) as err:
            raise ConfigError(f"--tokenizer {path}: no tokenizer there ({err})") from None
        self.path = path
        # SGLang encodes a rendered template without special tokens where encode("") adds some
        self.chat_encode: dict[str, Any] = {"add_special_tokens": False} if self.tokenizer.encode("") else {}
        self.trusted = False
        self.verdict = "not verified yet"
        self.counts: Counter[str] = Counter()

    def ids(self, source: Any) -> list[int] | None:
        """The ids of a ``/tokenize`` body ``source`` (``prompt.token_source``), None where not sure."""
        why = self._unsure(source)
        if why:
            self.counts[f"asked: {why}"] += 1
            return None
        self.counts["local"] += 1
        if "prompt" in source:
            return list(self.tokenizer.encode(source["prompt"]))
        text = self.tokenizer.apply_chat_template(source["messages"], tokenize=False,
                                                  add_generation_prompt=True)
        return list(self.tokenizer.encode(text, **self.chat_encode))

    @staticmethod
    def _unsure(source: Any) -> str:
        """Why ``source`` is not a shape rendered here ('' if it is)."""
        if not isinstance(source, dict):
            return "not a body"
        if "prompt" in source:
            return "" if set(source) == {"prompt"} and isinstance(source["prompt"], str) else "prompt shape"
        if extra := set(source) - CHAT_FIELDS:
            return f"field {min(extra)}"
        messages = source.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages shape"
        for m in messages:
            if not (isinstance(m, dict) and m.keys() == {"role", "content"} and m["role"] in ROLES
                    and isinstance(m["content"], str)):
                return "message shape"
        return "last message is the assistant's" if messages[-1]["role"] == "assistant" else ""

    async def verify(self, tokenize: Callable[[dict[str, Any]], Awaitable[Any]]) -> bool:
        """Trust :meth:`ids` if every probe gives the ids a server's ``/tokenize`` gives."""
        self.trusted = False
        for i, probe in enumerate(PROBES):
            try:
                answer = await tokenize(probe)
            except OSError as err:
                self.verdict = f"off: probe {i} not answered by /tokenize ({err})"
                return False
            mine = self.ids(probe)
            theirs = answer.get("tokens") if isinstance(answer, dict) else None
            if mine != theirs:
                self.verdict = f"off: probe {i} differs from the server's /tokenize ({mine} vs {theirs})"
                return False
        self.counts.clear()
        self.trusted, self.verdict = True, f"on: {len(PROBES)} probes equal to the server's /tokenize"
        return True

    def view(self) -> dict[str, Any]:
        return {"path": self.path, "verdict": self.verdict, **dict(self.counts)}
