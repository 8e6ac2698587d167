"""The gateway's fast plumbing keeps what the slow one did: JSON read as ``json`` reads it, a body
forwarded as sent with the rank pinned, a request's head bounded under httptools, the relayed paths'
405 and 500 answers."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.edge.trust import PIN_FIELDS
from sglang_fair.gateway.wire import dumps, parse, with_pin
from sglang_fair.harness.server import free_port

pytestmark = pytest.mark.timers

AWKWARD = [b'{"a": 123456789012345678901234567890}', b'{"a": -9223372036854775809}', b'{"a": NaN}',
           b'{"a": [Infinity, -Infinity]}', b'{"a": 1e400}', b'\xef\xbb\xbf{"a": 1}', b'{"a": "\\ud800"}',
           b'{"a": 1, "a": 2}', b'{"a": 18446744073709551615}', b' {"t": "\\u00e9\\n"} ']


@pytest.mark.parametrize("text", AWKWARD)
def test_parse_reads_what_json_reads(text: bytes) -> None:
    value, plain = parse(text)
    assert repr(value) == repr(json.loads(text))  # repr: nan != nan
    assert json.loads(dumps(value, plain)) == json.loads(json.dumps(value)) or value != value


def test_orjson_alone_would_not_read_as_json_does() -> None:
    """The negative control: why parse() has its guards."""
    assert orjson.loads(AWKWARD[0]) != json.loads(AWKWARD[0])  # an integer beyond 64 bits becomes a float
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(AWKWARD[2])
    assert orjson.dumps({"a": float("nan")}) == b'{"a":null}'  # why dumps() needs plain


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12)
bodies = st.dictionaries(st.sampled_from(["prompt", "}", "x", "{", *PIN_FIELDS]), json_values, max_size=4)


@settings(max_examples=300, deadline=None)
@given(body=bodies, rank=st.none() | st.integers(0, 7), indent=st.sampled_from([None, 0, 2]),
       trailing=st.sampled_from(["", " ", "\n  "]))
def test_a_forwarded_body_is_the_clients_with_the_rank_pinned(body: dict[str, Any], rank: int | None,
                                                              indent: int | None, trailing: str) -> None:
    raw = (json.dumps(body, indent=indent) + trailing).encode()
    sent = with_pin(raw, json.loads(raw), PIN_FIELDS, None if rank is None else ("routed_dp_rank", rank))
    expected = {k: v for k, v in body.items() if k not in PIN_FIELDS}
    if rank is not None:
        expected["routed_dp_rank"] = rank
    assert json.loads(sent) == expected
    if not PIN_FIELDS & body.keys():
        assert sent.startswith(raw[:raw.rindex(b"}")])  # the client's own bytes, not re-serialised


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def uvicorn_with(protocol: Any) -> Iterator[int]:
    import uvicorn

    port = free_port()
    config = uvicorn.Config(hello, port=port, http=protocol, log_level="error", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def status(port: int, header_bytes: int, body: bytes = b"{}") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/", body=body, headers={"X-Big": "x" * header_bytes})
        return conn.getresponse().status
    except ConnectionError:
        return 0
    finally:
        conn.close()


def test_a_head_over_the_bound_is_refused_under_httptools_as_under_h11() -> None:
    pytest.importorskip("httptools")
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from sglang_fair.gateway.plumbing import MAX_HEAD_BYTES, bounded_httptools

    with uvicorn_with(bounded_httptools()) as port:
        assert status(port, 8_000) == 200
        assert status(port, 8_000, b"x" * 4_000_000) == 200  # a large body is not a large head
        assert status(port, 200_000) in (0, 400)  # the bad-input e2e test's header
        assert status(port, 2 * MAX_HEAD_BYTES) in (0, 400)
    with uvicorn_with(HttpToolsProtocol) as port:  # the negative control: httptools alone serves it
        assert status(port, 200_000) == 200


class Wire:
    """A transport that keeps each write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_a_whole_answer_goes_out_in_one_write_and_everything_else_at_once() -> None:
    from sglang_fair.gateway.plumbing import HeadWithBody

    head = b"HTTP/1.1 200 OK\r\ndate: x\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n"
    wire = Wire()
    HeadWithBody(wire).write(head)
    assert wire.writes == []  # held for the body
    held = HeadWithBody(wire)
    held.write(head)
    held.write(b"{}")
    assert wire.writes == [head + b"{}"]
    stream = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    for first in (stream, b"HTTP/1.1 100 Continue\r\n\r\n"):  # a stream's head, an interim answer
        wire = Wire()
        HeadWithBody(wire).write(first)
        assert wire.writes == [first]
    wire = Wire()
    cut = HeadWithBody(wire)
    cut.write(head)
    cut.close()  # an application that failed after its answer began: the head, then the close
    assert wire.writes == [head] and cut.is_closing()


def test_answers_to_posts_and_heads_are_whole_through_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("httptools")
    from sglang_fair.gateway import plumbing

    writes: list[bytes] = []

    class Tapped(plumbing.HeadWithBody):
        def write(self, data: bytes) -> None:
            writes.append(data)
            super().write(data)

    monkeypatch.setattr(plumbing, "HeadWithBody", Tapped)
    with uvicorn_with(plumbing.bounded_httptools()) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        for method in ("POST", "HEAD", "POST", "GET"):
            conn.request(method, "/", body=b"x" if method == "POST" else None)
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, b"" if method == "HEAD" else b"ok"), method
        conn.close()
    assert len(writes) == 4 and writes[1::2] == [b"ok", b"ok"]  # the two POSTs' answers went through it


def test_fast_plumbing_names_what_it_uses() -> None:
    from sglang_fair.gateway.plumbing import fast_plumbing

    name, settings_ = fast_plumbing()
    assert name.split(", ")[0] == settings_["loop"] in ("uvloop", "asyncio")
    assert name.endswith("h11") == (settings_["http"] == "h11")


def test_the_relayed_paths_answer_405_to_other_methods_and_500_when_the_gateway_fails() -> None:
    pytest.importorskip("fastapi")
    import aiohttp
    from fake_sglang import FakeSGLang, Running
    from test_gateway import config, gateway_at

    async def scenario(urls: list[str]) -> None:
        async with gateway_at(config(urls)) as (url, gateway), aiohttp.ClientSession() as session:
            async with session.get(url + "/v1/chat/completions") as resp:
                assert resp.status == 405

            async def broken(*_: Any) -> Any:
                raise RuntimeError("a bug")

            gateway.relay = broken  # type: ignore[method-assign]
            async with session.post(url + "/generate", json={"text": "hi"}) as resp:
                assert resp.status == 500
                assert (await resp.json())["message"] == "the gateway failed: RuntimeError"

    with Running(FakeSGLang()) as urls:
        asyncio.run(asyncio.wait_for(scenario(urls), 30))
