"""One streamed call to an OpenAI-compatible server, timed, with what the server reported.

The request asks for usage in the stream (``stream_options.include_usage``) and, where the server
supports it, per chunk (``continuous_usage_stats``: SGLang and vLLM do). Token counts and cached
tokens come only from those usage fields; a field the server leaves out stays ``None``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

Clock = Callable[[], float]


@dataclass
class CallOutcome:
    """What one call measured. Times are seconds since the run started; ``None`` = not reached."""

    sent: float
    first_token: float | None = None
    finished: float | None = None
    text: str = ""
    token_ids: list[int] | None = None  # generated ids, where the server returns them
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    chunks: list[tuple[float, int | None]] = field(default_factory=list)  # (time, cumulative tokens)
    error: str | None = None  # connect, timeout, http_NNN, stream, cancelled

    def token_times(self) -> list[tuple[float, int]]:
        """(time, tokens generated in that chunk); spread evenly over chunks (in whole tokens) where
        the server did not count per chunk. Empty when the server reported no completion_tokens."""
        n = self.completion_tokens
        if n is None or not self.chunks:
            return []
        if all(c is not None for _, c in self.chunks):
            out, prev = [], 0
            for t, c in self.chunks:
                out.append((t, max(0, (c or 0) - prev)))
                prev = max(prev, c or 0)
            out[-1] = (out[-1][0], out[-1][1] + max(0, n - prev))
            return out
        base, extra = divmod(n, len(self.chunks))
        return [(t, base + (i < extra)) for i, (t, _) in enumerate(self.chunks)]


def request_body(api: str, model: str, prompt: str | list[int], max_tokens: int, ignore_eos: bool,
                 user: str | None) -> dict[str, Any]:
    """The JSON body of a streamed completion (``api`` = completions or chat); a token-id prompt
    asks for the generated ids back (``return_token_ids``)."""
    body: dict[str, Any] = {
        "model": model, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
        if isinstance(prompt, list):
            body["return_token_ids"] = True
    if ignore_eos:
        body["ignore_eos"] = True
    if user is not None:
        body["user"] = user
    return body


async def stream_call(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                      body: dict[str, Any], out: CallOutcome, clock: Clock) -> None:
    """POST ``body`` to ``url`` and fill ``out`` as the stream arrives (errors go in ``out.error``;
    cancellation propagates, leaving what was measured so far)."""
    try:
        async with session.post(url, json=body, headers=headers) as resp:
            if resp.status != 200:
                out.error = f"http_{resp.status}"
                await resp.read()
                return
            async for raw in resp.content:
                if not _on_line(raw, out, clock):
                    break
    except TimeoutError:
        out.error = "timeout"
        return
    except aiohttp.ClientConnectionError:
        out.error = "connect"
        return
    except aiohttp.ClientError:
        out.error = "stream"
        return
    if out.error is None:
        out.finished = clock()


def _on_line(raw: bytes, out: CallOutcome, clock: Clock) -> bool:
    """Handle one SSE line; False at ``[DONE]`` or on an error event."""
    line = raw.strip()
    if not line.startswith(b"data:"):
        return True
    data = line[5:].strip()
    if data == b"[DONE]":
        return False
    try:
        chunk = json.loads(data)
    except ValueError:
        out.error = "stream"
        return False
    if not isinstance(chunk, dict) or "error" in chunk:
        out.error = "stream"
        return False
    usage = chunk.get("usage") if isinstance(chunk.get("usage"), dict) else None
    if usage is not None:
        _take_usage(usage, out)
    choices = chunk.get("choices") or []
    for c in choices:
        if isinstance(c, dict) and isinstance(c.get("token_ids"), list):
            out.token_ids = (out.token_ids or []) + [i for i in c["token_ids"] if isinstance(i, int)]
    text = "".join(_choice_text(c) for c in choices)
    if text:
        now = clock()
        if out.first_token is None:
            out.first_token = now
        out.text += text
        count = usage.get("completion_tokens") if usage is not None else None
        out.chunks.append((now, count if isinstance(count, int) else None))
    return True


def _choice_text(choice: Any) -> str:
    if not isinstance(choice, dict):
        return ""
    text = choice.get("text")
    if text is None and isinstance(choice.get("delta"), dict):
        text = choice["delta"].get("content")
    return text if isinstance(text, str) else ""


def _take_usage(usage: dict[str, Any], out: CallOutcome) -> None:
    if isinstance(usage.get("prompt_tokens"), int):
        out.prompt_tokens = usage["prompt_tokens"]
    if isinstance(usage.get("completion_tokens"), int):
        out.completion_tokens = usage["completion_tokens"]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        out.cached_tokens = details["cached_tokens"]


def run_clock() -> Clock:
    """Seconds since this call (a run's time origin)."""
    t0 = time.perf_counter()
    return lambda: time.perf_counter() - t0
