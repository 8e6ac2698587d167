"""The prompt's token ids in the gateway itself, without the ``/tokenize`` round trip, where it is sure
(``--tokenizer``, by default ``auto``: the servers' model or tokenizer directory, where it is readable
here).

:class:`LocalTokenizer` loads the tokenizer and its chat template with ``tokenizers`` and ``jinja2``
(the ``gateway`` extra; :mod:`.tokenizer_files`: the files SGLang's loader, ``transformers``,
reads, without importing it and torch) and gives ids only for the request shapes whose
rendering it mirrors from SGLang 0.5.23 (``serving_chat._apply_jinja_template``, default path): a
prompt string (``tokenizer.encode``, as ``/tokenize`` encodes one), and a chat whose messages are only
``role`` (system, user, assistant; not last) and string ``content``, with no field that changes the
rendering (tools, ``tool_choice``, ``chat_template_kwargs``, ``reasoning_effort``,
``continue_final_message``, ...: anything not in :data:`CHAT_FIELDS`), rendered with
``add_generation_prompt`` and encoded as SGLang encodes a rendered template. For every other shape it
gives None and the gateway asks a server's ``/tokenize``, counted per reason (``/gateway/state``).

Text is encoded from cached pieces where the tokenizer allows it (:mod:`.token_pieces`): a prompt
costs the encoding of what earlier prompts did not share with it.

It is trusted only after :meth:`verify`: at start-up the gateway tokenizes :data:`PROBES` (multi-turn,
system prompts, text that looks like the template's own markers, completions) itself and through a
server's ``/tokenize``; one difference (a server with its own ``--chat-template`` or template
arguments, another tokenizer, another SGLang) and every request goes to ``/tokenize``, with the
difference in the log and in the state.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sglang_fair.core.errors import ConfigError
from sglang_fair.gateway.servers import ServerInfo
from sglang_fair.gateway.token_pieces import PieceEncoder, unsure_why
from sglang_fair.gateway.tokenizer_files import TokenizerFiles, compiled, hub_snapshot

logger = logging.getLogger("sglang_fair.gateway")
AUTO, NONE = "auto", "none"

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


def local_tokenizer(setting: str, servers: Sequence[ServerInfo]) -> LocalTokenizer | None:
    """The gateway's tokenizer for ``--tokenizer setting``: none (``none``), the directory named, or with
    ``auto`` (the default) the first server's tokenizer (``/server_info``'s ``tokenizer_path``, else
    ``model_path``) where that is a directory here, or a hub model in this machine's Hugging Face
    cache, and loads; else none, said in the log (every prompt to ``/tokenize``)."""
    if setting in (NONE, ""):
        return None
    if setting != AUTO:
        return LocalTokenizer(setting)
    server = servers[0]
    named = server.tokenizer_path or server.model_path
    path = named if os.path.isdir(named) else hub_snapshot(named)
    if not path:
        logger.warning("gateway: --tokenizer auto: %r (%s/server_info) is not a directory here nor in "
                       "this machine's Hugging Face cache, so every prompt is tokenized by a server (give "
                       "--tokenizer DIR to tokenize here)", named, server.url)
        return None
    try:
        return LocalTokenizer(path)
    except ConfigError as err:
        logger.warning("gateway: --tokenizer auto: %s; every prompt is tokenized by a server", err)
        return None


class LocalTokenizer:
    """A tokenizer and chat template loaded from ``path``; :meth:`ids` of the shapes it is sure of."""

    def __init__(self, path: str) -> None:
        self.tokenizer = TokenizerFiles(path)
        self.path = path
        # SGLang encodes a rendered template without special tokens where encode("") adds some
        self.chat_specials = not self.tokenizer.encode("")
        self.template = self._compiled_template()
        self.template_vars: dict[str, Any] = {  # what apply_chat_template passes it, globals first
            **(self.template.globals if self.template is not None else {}), "tools": None,
            "documents": None, "add_generation_prompt": True, **self.tokenizer.special_tokens_map}
        self.head: list[int] = []  # the special tokens ``encode`` puts around a text, where it does
        self.tail: list[int] = []
        self.pieces, self.pieces_verdict = self._pieces()
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
            return self.encode(source["prompt"], True)
        return self.encode(self.render(source["messages"]), self.chat_specials)

    def render(self, messages: list[dict[str, str]]) -> str:
        """The chat's prompt text, as ``apply_chat_template(..., add_generation_prompt=True)`` renders it
        (``Template.render`` without its per-call merge of the globals)."""
        context = self.template.new_context({**self.template_vars, "messages": messages}, shared=True)
        return "".join(self.template.root_render_func(context))

    def _compiled_template(self) -> Any:
        """The chat template compiled (None where there is none or it does not compile: chats are then
        left to ``/tokenize``)."""
        if not self.tokenizer.chat_template:
            return None
        try:
            return compiled(self.tokenizer.chat_template)
        except Exception as err:  # jinja2's TemplateSyntaxError, or an extension it does not know
            logger.warning("gateway: local tokenizer: the chat template does not compile here (%s)", err)
            return None

    def encode(self, text: str, specials: bool) -> list[int]:
        """``tokenizer.encode(text, add_special_tokens=specials)``, from cached pieces where they are on."""
        if self.pieces is None or not self.pieces.on:
            return self.encode_whole(text, specials)
        ids = self.pieces.encode(text)
        return [*self.head, *ids, *self.tail] if specials else ids

    def encode_whole(self, text: str, specials: bool) -> list[int]:
        """``tokenizer.encode`` itself."""
        return self.tokenizer.encode(text, add_special_tokens=specials)

    def _pieces(self) -> tuple[PieceEncoder | None, str]:
        """The piece encoder if this tokenizer's pieces are safe and equal to the whole, and why (not)."""
        backend = self.tokenizer.backend
        if why := unsure_why(backend):
            return None, f"off: {why}"
        plain = self.tokenizer.encode("x", add_special_tokens=False)
        wrapped = self.tokenizer.encode("x")
        at = next((i for i in range(len(wrapped) - len(plain) + 1) if wrapped[i:i + len(plain)] == plain), -1)
        if not plain or at < 0:
            return None, "off: the special tokens do not wrap the text"
        self.head, self.tail = wrapped[:at], wrapped[at + len(plain):]
        pieces = PieceEncoder(backend, lambda text: self.encode_whole(text, False))
        probes = [p.get("prompt") or "".join(m["content"] for m in p["messages"]) for p in PROBES]
        why = pieces.check(probes)
        return (None, f"off: {why}") if why else (pieces, "on")

    def _unsure(self, source: Any) -> str:
        """Why ``source`` is not a shape rendered here ('' if it is)."""
        if not isinstance(source, dict):
            return "not a body"
        if "prompt" in source:
            return "" if set(source) == {"prompt"} and isinstance(source["prompt"], str) else "prompt shape"
        if self.template is None:
            return "no chat template"
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
        pieces = self.pieces.view() if self.pieces is not None else {"pieces": self.pieces_verdict}
        return {"path": self.path, "verdict": self.verdict, **dict(self.counts), **pieces}
