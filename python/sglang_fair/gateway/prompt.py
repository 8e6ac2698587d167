"""The token ids a request's prompt is, as the server will see them (the global tree is keyed by them).

Exact: prompts and plain chats are tokenized in the gateway where it holds the servers' tokenizer
(:mod:`.local_tokens`, by default where it can read it) and is sure; everything else is asked of a
server's own ``/tokenize`` (SGLang 0.5.23, ``entrypoints/openai/serving_tokenize.py``), which encodes
a ``prompt`` with the server's tokenizer and renders ``messages`` through the same
``OpenAIServingChat`` path (chat template, tools, ``chat_template_kwargs``) as a chat completion, at
one extra round trip. Token ids a request already carries (``input_ids``, a completion's token
prompt) are used as they are. A batch is routed on its first prompt. :class:`ServerTokenizer` is the
gateway's one tokenizer: the servers not taken out take turns.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sglang_fair.edge.trust import PIN_FIELDS
from sglang_fair.gateway.local_tokens import LocalTokenizer
from sglang_fair.gateway.servers import ServerInfo
from sglang_fair.gateway.wire import dumps

CHAT, COMPLETIONS, GENERATE = "/v1/chat/completions", "/v1/completions", "/generate"
NOT_TOKENIZED = (*PIN_FIELDS, "prompt", "stream", "stream_options")  # /tokenize refuses streaming (501)

U32 = "I" if array("I").itemsize == 4 else ""  # an array type code of unsigned 32-bit ints (C's int)
TokenSource = list[int] | dict[str, Any] | None  # ids as they are, a /tokenize body, or nothing


def _first(prompt: Any) -> str | list[int] | None:
    """One prompt of a (possibly batched) ``prompt``/``text``/``input_ids`` value."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return prompt
        return _first(prompt[0])
    return None


def token_source(path: str, body: dict[str, Any]) -> TokenSource:
    """What gives the prompt's token ids for a request on ``path`` with JSON ``body``."""
    if path == CHAT:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        return {k: v for k, v in body.items() if k not in NOT_TOKENIZED}
    if path == COMPLETIONS:
        prompt = _first(body.get("prompt"))
    elif path == GENERATE:
        ids = body.get("input_ids")
        prompt = _first(ids) if ids is not None else _first(body.get("text"))
    else:
        return None
    return {"prompt": prompt} if isinstance(prompt, str) else prompt


async def prompt_tokens(source: TokenSource,
                        tokenize: Callable[[dict[str, Any]], Awaitable[Any]]) -> list[int]:
    """The token ids of ``source``; ``tokenize(body)`` is a server's ``/tokenize`` answer. A prompt the
    server cannot tokenize routes on no tokens (the server then answers the request's real error)."""
    if source is None or isinstance(source, list):
        return _keys(source or [])
    try:
        answer = await tokenize(source)
    except OSError:
        return []
    ids = answer.get("tokens") if isinstance(answer, dict) else None
    if isinstance(ids, list) and ids and isinstance(ids[0], list):
        ids = ids[0]
    return _keys(ids) if isinstance(ids, list) else []


def _keys(ids: list[Any]) -> list[int]:
    """``ids`` when every one can key the tree (an int in [0, 2**32)), else none: a request with an
    id out of range routes on nothing, and its server answers the error (400, outside the vocabulary).
    The check is an unsigned 32-bit array's (C; one generator step per id was 3% of a chat's CPU)."""
    if U32:
        try:
            array(U32, ids)
        except (TypeError, OverflowError):
            return []
        return list(ids)
    return list(ids) if all(isinstance(t, int) and 0 <= t < 1 << 32 for t in ids) else []


PostJson = Callable[[str, str, bytes, float], Awaitable[Any]]  # (url, path, JSON body, timeout)


class ServerTokenizer:
    """The prompt's token ids from a server's ``/tokenize``, within ``timeout`` s: ``servers()`` (those
    not taken out) take turns; ``post`` is the gateway's upstream call (``upstream.Upstream.post_json``,
    bound once its session is open)."""

    def __init__(self, servers: Callable[[], Sequence[ServerInfo]], timeout: float,
                 local: LocalTokenizer | None = None) -> None:
        self.servers, self.timeout, self.local = servers, timeout, local
        self.post: PostJson | None = None
        self._turn = itertools.count()

    async def tokenize(self, body: dict[str, Any], plain: bool = False) -> Any:
        """One server's ``/tokenize`` answer for ``body`` (``plain``: see ``wire.dumps``)."""
        if self.post is None:
            raise RuntimeError("the gateway is not started")
        servers = self.servers()
        server = servers[next(self._turn) % len(servers)]
        return await self.post(server.url, "/tokenize", dumps(body, plain), self.timeout)

    async def tokens(self, path: str, body: dict[str, Any], plain: bool = False) -> list[int]:
        """The token ids of the prompt of a request to ``path`` (none when they cannot be had): the
        gateway's own where its verified local tokenizer is sure, else a server's."""
        source = token_source(path, body)
        if self.local is not None and self.local.trusted and isinstance(source, dict):
            ids = self.local.ids(source)
            if ids is not None:
                return ids  # a tokenizer's own ids: vocabulary indices, each a key of the tree
        return await prompt_tokens(source, lambda source: self.tokenize(source, plain))
