"""How many output tokens a response carried (the policy's finish feedback), from what the gateway relays.

A JSON answer: OpenAI ``usage.completion_tokens``, else SGLang's ``meta_info.completion_tokens``
(``/generate``; summed over a batch). A stream (server-sent events): the last ``usage`` seen, else
the latest ``meta_info.completion_tokens`` of each output ``index`` summed, else the number of chunks
that carried text (an estimate: SGLang sends one chunk per ``--stream-interval`` tokens, 1 by default).
"""

from __future__ import annotations

from typing import Any

from sglang_fair.gateway.wire import loads


def _completion_tokens(item: Any) -> int | None:
    if not isinstance(item, dict):
        return None
    usage, meta = item.get("usage"), item.get("meta_info")
    for holder in (usage, meta):
        if isinstance(holder, dict) and isinstance(holder.get("completion_tokens"), int):
            return int(holder["completion_tokens"])
    return None


def output_tokens(payload: Any) -> int:
    """Output tokens of a whole JSON answer (0 when it says nothing)."""
    if isinstance(payload, list):
        return sum(_completion_tokens(p) or 0 for p in payload)
    return _completion_tokens(payload) or 0


class StreamCounter:
    """Reads a server-sent-event stream as it is relayed, chunk by chunk (lines may span chunks)."""

    def __init__(self) -> None:
        self._pending = b""
        self._usage: int | None = None
        self._meta: dict[Any, int] = {}
        self._text_chunks = 0

    def feed(self, chunk: bytes) -> None:
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        try:
            event = loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self._usage = usage["completion_tokens"]
        meta = event.get("meta_info")
        if isinstance(meta, dict) and isinstance(meta.get("completion_tokens"), int):
            self._meta[event.get("index", 0)] = meta["completion_tokens"]
        if any(_has_text(c) for c in event.get("choices") or []):
            self._text_chunks += 1

    @property
    def tokens(self) -> int:
        if self._usage is not None:
            return self._usage
        if self._meta:
            return sum(self._meta.values())
        return self._text_chunks


def _has_text(choice: Any) -> bool:
    if not isinstance(choice, dict):
        return False
    delta = choice.get("delta")
    return bool(choice.get("text")) or (isinstance(delta, dict) and bool(delta.get("content")))
