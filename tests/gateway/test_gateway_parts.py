"""The gateway's pure parts: which token ids a request routes on, how many output tokens it carried."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.gateway.prompt import prompt_tokens, token_source
from sglang_fair.gateway.servers import discover
from sglang_fair.gateway.usage import StreamCounter, output_tokens

pytestmark = pytest.mark.timers


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


class LateServers:
    """``fetch`` for discovery: each server refuses until its start time on a fake clock; asking
    for an answer moves the clock one second on (a refused connection takes that long here)."""

    def __init__(self, up_at: dict[str, float]) -> None:
        self.up_at, self.now = up_at, 0.0

    def clock(self) -> float:
        return self.now

    async def fetch(self, url: str, path: str) -> Any:
        self.now += 1.0
        if self.now < self.up_at[url]:
            raise OSError(f"{url}{path}: connection refused")
        if path == "/server_info":
            return {"served_model_name": "m", "dp_size": 2}
        raise type("NotFound", (OSError,), {"status": 404})()


def test_discovery_waits_for_a_server_still_starting_and_says_what_it_waits_for() -> None:
    servers, said = LateServers({"http://a:1": 0.0, "http://b:1": 40.0}), []
    table = asyncio.run(discover(list(servers.up_at), servers.fetch, 600.0, servers.clock, said.append,
                                 retry_every=0.0))
    assert [(s.url, s.dp_size) for s in table.servers] == [("http://a:1", 2), ("http://b:1", 2)]
    assert len(said) >= 2 and all(line.startswith("waiting for http://b:1") for line in said)
    assert "connection refused" in said[0]


def test_discovery_gives_up_on_a_server_silent_for_the_whole_timeout() -> None:
    servers = LateServers({"http://a:1": 0.0, "http://b:1": 1e9})
    with pytest.raises(ConfigError, match=r"http://b:1: no answer from /server_info within 30 s"):
        asyncio.run(discover(list(servers.up_at), servers.fetch, 30.0, servers.clock, retry_every=0.0))


def test_the_ready_line_counts_in_words_a_person_would_write() -> None:
    from sglang_fair.gateway.config import GatewayConfig
    from sglang_fair.gateway.launch import ready_line
    from sglang_fair.gateway.servers import ServerInfo, WorkerTable

    config = GatewayConfig(worker_urls="http://127.0.0.1:30000", port=8080)
    one = ready_line(config, WorkerTable([ServerInfo("http://127.0.0.1:30000", "tiny", 1)]))
    assert "1 server of 'tiny', 1 worker," in one and "1 servers" not in one
    assert one.startswith("sglang-fair gateway: ready on http://") and ":8080" in one
    servers = [ServerInfo("http://a:1", "tiny", 2), ServerInfo("http://b:1", "tiny", 1)]
    two = ready_line(config, WorkerTable(servers))
    assert "2 servers of 'tiny', 3 workers," in two
