"""The stub upstream of ``sglang-fair lab gateway-speed``: SGLang servers that answer at once, no model.

One process serves every port given, each port one SGLang server of one worker: a plain asyncio
protocol with httptools' parser and orjson (an aiohttp server took 0.2 ms of its core per chat relayed,
which capped every gateway measured near 2,300 chats/s on a two-core machine).

    python -m sglang_fair.lab.gateway_speed.stub --ports P1,P2 [--tokenizer DIR]

It answers ``/server_info``, ``/health``, ``/tokenize`` (one id per word of the prompt; with
``--tokenizer DIR`` that tokenizer's ids, a chat rendered as SGLang renders it), and ``/generate`` and
``/v1/chat/completions`` (a fixed 8-token answer) without waiting (uvloop's event loop where installed).
"""

from __future__ import annotations

import argparse
import asyncio
import zlib
from collections.abc import Callable
from typing import Any

import httptools
import orjson

from sglang_fair.harness.async_load import run

ANSWER = {"id": "c", "object": "chat.completion", "model": "stub",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "x" * 8},
                       "finish_reason": "length"}],
          "usage": {"prompt_tokens": 200, "completion_tokens": 8, "total_tokens": 208}}
GENERATED = {"text": "x" * 8, "meta_info": {"prompt_tokens": 200, "completion_tokens": 8}}
Answer = tuple[int, bytes]  # status, JSON body


def stub_answers(tokenizer: str = "") -> Callable[[bytes, bytes, bytes], Answer]:
    """The stub's answer to (method, path, body): every one at once; ``/tokenize`` with the tokenizer at
    ``tokenizer`` (as SGLang renders a plain chat) if given, else one id per word."""
    encode = real_tokenize(tokenizer) if tokenizer else None
    info = {"served_model_name": "stub", "model_path": tokenizer or "/stub", "dp_size": 1}
    fixed = {(b"GET", b"/server_info"): orjson.dumps(info),
             (b"GET", b"/health"): b"ok", (b"POST", b"/v1/chat/completions"): orjson.dumps(ANSWER),
             (b"POST", b"/generate"): orjson.dumps(GENERATED)}
    words: dict[str, int] = {}

    def word_ids(text: str) -> list[int]:
        out = []
        for w in text.split():
            if (i := words.get(w)) is None:
                i = words[w] = zlib.crc32(w.encode()) & 0xFFFF
            out.append(i)
        return out

    def answer(method: bytes, path: bytes, body: bytes) -> Answer:
        if (known := fixed.get((method, path))) is not None:
            return 200, known
        if (method, path) != (b"POST", b"/tokenize"):
            return 404, b'{"detail":"Not Found"}'
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return 400, b'{"detail":"not JSON"}'
        if encode is not None:
            ids = encode(request)
        else:
            text = request.get("prompt") or " ".join(str(m.get("content"))
                                                     for m in request.get("messages", []))
            ids = word_ids(str(text))
        return 200, orjson.dumps({"tokens": ids, "count": len(ids)})

    return answer


class StubProtocol(asyncio.Protocol):
    """One client connection to the stub (HTTP/1.1, kept alive): each request answered as it ends."""

    def __init__(self, answer: Callable[[bytes, bytes, bytes], Answer]) -> None:
        self.answer, self.parser = answer, httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url, self.body = b"", [b""]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.close()

    def on_message_begin(self) -> None:
        self.url, self.body = b"", []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        assert self.transport is not None
        status, body = self.answer(self.parser.get_method(), self.url.partition(b"?")[0], b"".join(self.body))
        reason = b"OK" if status == 200 else b"Not Found" if status == 404 else b"Bad Request"
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             b"%s" % (status, reason, len(body), body))
        if not self.parser.should_keep_alive():
            self.transport.close()


def real_tokenize(path: str) -> Callable[[dict[str, Any]], list[int]]:
    """The ids of a ``/tokenize`` body by the tokenizer at ``path`` (a chat with its template)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    chat_kwargs = {"add_special_tokens": False} if tok.encode("") else {}

    def encode(body: dict[str, Any]) -> list[int]:
        if "messages" in body:
            text = tok.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
            return list(tok.encode(text, **chat_kwargs))
        return list(tok.encode(body["prompt"]))

    return encode


async def serve_stub(ports: list[int], tokenizer: str = "") -> None:
    """Serve the stub on every one of ``ports`` (127.0.0.1) until cancelled."""
    answer, loop = stub_answers(tokenizer), asyncio.get_running_loop()
    servers = [await loop.create_server(lambda: StubProtocol(answer), "127.0.0.1", port) for port in ports]
    try:
        await asyncio.Event().wait()
    finally:
        for server in servers:
            server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ports", required=True, help="comma-separated ports to serve on")
    parser.add_argument("--tokenizer", default="", help="a model directory whose tokenizer /tokenize uses")
    args = parser.parse_args()
    run(lambda: serve_stub([int(p) for p in args.ports.split(",")], args.tokenizer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
