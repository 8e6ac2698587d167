"""The gateway's pure parts: which token ids a request routes on, how many output tokens it carried."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sglang_fair.gateway.prompt import prompt_tokens, token_source
from sglang_fair.gateway.usage import StreamCounter, output_tokens


@pytest.mark.parametrize(("path", "body", "source"), [
    ("/generate", {"text": "hi"}, {"prompt": "hi"}),
    ("/generate", {"text": ["a", "b"]}, {"prompt": "a"}),  # a batch routes on its first prompt
    ("/generate", {"input_ids": [3, 4]}, [3, 4]),
    ("/generate", {"input_ids": [[3, 4], [5]], "text": "ignored"}, [3, 4]),
    ("/v1/completions", {"prompt": [7, 8]}, [7, 8]),
    ("/v1/completions", {"prompt": "p"}, {"prompt": "p"}),
    ("/v1/chat/completions", {"messages": [], "stream": True, "stream_options": {}, "routed_dp_rank": 1,
                              "tools": [], "n": 2}, {"messages": [], "tools": [], "n": 2}),
    ("/v1/chat/completions", {"prompt": "no messages"}, None),
    ("/generate", {"input_embeds": [[0.1]]}, None),
])
def test_token_source(path: str, body: dict[str, Any], source: Any) -> None:
    assert token_source(path, body) == source


def test_prompt_tokens_asks_the_server_only_for_text() -> None:
    asked: list[dict[str, Any]] = []

    async def tokenize(body: dict[str, Any]) -> Any:
        asked.append(body)
        return {"tokens": [[9, 9]] if body.get("prompt") == "batch" else [1, 2, 3]}

    async def broken(body: dict[str, Any]) -> Any:
        raise OSError("down")

    assert asyncio.run(prompt_tokens([5], tokenize)) == [5] and asked == []
    assert asyncio.run(prompt_tokens({"prompt": "x"}, tokenize)) == [1, 2, 3]
    assert asyncio.run(prompt_tokens({"prompt": "batch"}, tokenize)) == [9, 9]
    assert asyncio.run(prompt_tokens({"prompt": "x"}, broken)) == []  # routes on nothing; the server answers
    assert asyncio.run(prompt_tokens(None, tokenize)) == []
    assert asyncio.run(prompt_tokens([5, -3], tokenize)) == []  # not a key: routes on nothing, the
    assert asyncio.run(prompt_tokens([1 << 32], tokenize)) == []  # server answers its 400


def test_output_tokens_of_a_whole_answer() -> None:
    assert output_tokens({"usage": {"completion_tokens": 4}}) == 4
    assert output_tokens({"meta_info": {"completion_tokens": 3}}) == 3
    batch = [{"meta_info": {"completion_tokens": 3}}, {"meta_info": {"completion_tokens": 2}}]
    assert output_tokens(batch) == 5
    assert output_tokens({"error": "x"}) == 0


def feed(counter: StreamCounter, text: str, pieces: int = 3) -> StreamCounter:
    data = text.encode()
    step = max(1, len(data) // pieces)
    for i in range(0, len(data), step):  # lines split across chunks
        counter.feed(data[i:i + step])
    return counter


def test_stream_counter() -> None:
    chat = "".join(f'data: {{"choices":[{{"index":0,"delta":{{"content":"w{i}"}}}}]}}\n\n' for i in range(5))
    empty = 'data: {"choices":[{"delta":{"content":""}}]}\n\ndata: [DONE]\n\n'
    assert feed(StreamCounter(), chat + empty).tokens == 5
    usage = chat + 'data: {"choices":[],"usage":{"completion_tokens":9}}\n\ndata: [DONE]\n\n'
    assert feed(StreamCounter(), usage).tokens == 9
    native = "".join(f'data: {{"index":{i % 2},"meta_info":{{"completion_tokens":{i // 2 + 1}}}}}\n\n'
                     for i in range(6))
    assert feed(StreamCounter(), native, 7).tokens == 6  # 3 per output of n = 2
