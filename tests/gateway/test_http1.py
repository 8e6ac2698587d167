"""The gateway's HTTP/1.1 client (``gateway/http1.py``) against a scripted server: framing (length,
chunked, to the end of the connection), kept-alive connections and when they are not kept, timeouts,
and what each failure raises."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from sglang_fair.gateway.dns import Resolver
from sglang_fair.gateway.http1 import (
    PAUSE_AT,
    Answer,
    BrokenOff,
    Pool,
    ReadTimeout,
    Target,
    Unconnected,
    header_lines,
)

pytestmark = pytest.mark.timers

Script = bytes | Callable[[asyncio.StreamWriter], Awaitable[None]]  # an answer, or what writes one


def whole(body: bytes = b'{"ok":1}', extra: bytes = b"", status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status, len(body), extra, body)


class Scripted:
    """A server answering the n-th request (on any connection) with ``answers[n]``; counts connections
    and keeps each request's bytes."""

    def __init__(self, answers: list[Script]) -> None:
        self.answers, self.connections, self.requests = list(answers), 0, []  # type: ignore[var-annotated]
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Scripted:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()

    def url(self, path: str = "/p") -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}{path}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if isinstance(answer, bytes):
                    writer.write(answer)
                    await writer.drain()
                else:
                    await answer(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def call(pool: Pool, url: str, body: bytes = b"{}", total: float | None = None,
               client: str = "alice") -> Answer:
    target = Target(url)
    head = target.head(b"POST", header_lines({"content-type": "application/json", "x-client-id": client}))
    return await pool.request(target, head, body, total)


async def read_all(answer: Answer) -> bytes:
    return await answer.whole()


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), 20))


def test_a_whole_answer_and_its_connection_kept_for_the_next_call() -> None:
    async def scenario() -> None:
        async with Scripted([whole(b'{"a":1}', b"Retry-After: 3\r\n"), whole(b'{"b":2}')]) as server:
            async with Pool(5, 5) as pool:
                first = await call(pool, server.url("/v1/x?q=1"), b'{"n":1}')
                assert first.status == 200 and first.headers["retry-after"] == "3"
                assert first.headers["content-type"] == "application/json"
                assert await read_all(first) == b'{"a":1}'
                assert await read_all(await call(pool, server.url())) == b'{"b":2}'
            assert server.connections == 1  # kept alive (a pool that closed each would open 2)
            request = server.requests[0]
            assert request.startswith(b"POST /v1/x?q=1 HTTP/1.1\r\nHost: 127.0.0.1:")
            assert b"x-client-id: alice\r\n" in request
            assert request.endswith(b'Content-Length: 7\r\n\r\n{"n":1}')
    run(scenario)


@pytest.mark.parametrize(("answer", "kept"), [
    (whole(extra=b"Connection: close\r\n"), False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\n{\"ok\":1}", False),  # HTTP/1.0 closes unless it says
    (b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\nConnection: keep-alive\r\n\r\n{\"ok\":1}", True),
    (whole(), True),
])
def test_a_connection_is_kept_only_where_the_answer_allows(answer: bytes, kept: bool) -> None:
    async def scenario() -> None:
        async with Scripted([answer, whole()]) as server, Pool(5, 5) as pool:
            assert await read_all(await call(pool, server.url())) == b'{"ok":1}'
            assert await read_all(await call(pool, server.url())) == b'{"ok":1}'
            assert server.connections == (1 if kept else 2)
    run(scenario)


def test_a_chunked_answer_arrives_piece_by_piece_and_keeps_its_connection() -> None:
    go = asyncio.Event()

    async def stream(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata:1\r\n")
        await writer.drain()
        await go.wait()
        writer.write(b"6;ext=1\r\ndata:2\r\n0\r\nTrailer: x\r\n\r\n")
        await writer.drain()

    async def scenario() -> None:
        async with Scripted([stream, whole()]) as server, Pool(5, 5) as pool:
            answer = await call(pool, server.url())
            pieces = answer.iter_any()
            assert await pieces.__anext__() == b"data:1"  # before the server wrote the rest
            go.set()
            assert [p async for p in pieces] == [b"data:2"]
            answer.release()
            assert await read_all(await call(pool, server.url())) == b'{"ok":1}'
            assert server.connections == 1
    run(scenario)


def test_bodies_framed_every_way_are_read_whole() -> None:
    big = bytes(range(256)) * (PAUSE_AT // 128)  # over the stream's pause mark: reading pauses, resumes
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(big), big)

    async def to_the_end(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + big)
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with Scripted([whole(big), chunked, to_the_end,
                             b"HTTP/1.1 100 Continue\r\n\r\n" + whole(),
                             b"HTTP/1.1 204 No Content\r\n\r\n"]) as server, Pool(5, 5) as pool:
            for expected in (big, big, big, b'{"ok":1}', b""):
                assert await read_all(await call(pool, server.url())) == expected
    run(scenario)


def test_what_each_failure_raises() -> None:
    async def close(writer: asyncio.StreamWriter) -> None:
        writer.close()

    async def half(writer: asyncio.StreamWriter) -> None:
        writer.write(whole(b'{"long":1}')[:-3])
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        async with Scripted([close]) as server, Pool(5, 5) as pool:
            with pytest.raises(BrokenOff, match="closed the connection"):
                await call(pool, server.url())
        async with Scripted([half]) as server, Pool(5, 5) as pool:
            answer = await call(pool, server.url())
            with pytest.raises(BrokenOff):
                await answer.read()
        for junk in (b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
                     b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
            async with Scripted([junk]) as server, Pool(5, 5) as pool:
                with pytest.raises(BrokenOff):
                    await read_all(await call(pool, server.url()))
        async with Scripted([]) as server:
            url = server.url()
        with pytest.raises(Unconnected, match="cannot connect"):  # nothing listens there now
            await call(Pool(5, 5), url)
        with pytest.raises(ValueError, match="control character"):
            header_lines({"x-client-id": "eve\r\nx-injected: 1"})
    run(scenario)


def test_silence_past_the_read_timeout_and_a_call_past_its_deadline_time_out() -> None:
    async def silent(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def trickle(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        for _ in range(100):
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.02)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        async with Scripted([silent]) as server, Pool(5, 0.2) as pool:
            start = loop.time()
            with pytest.raises(ReadTimeout):
                await call(pool, server.url())
            assert 0.15 < loop.time() - start < 2
        async with Scripted([trickle]) as server, Pool(5, 0.2) as pool:  # never silent 0.2 s, but 2 s long
            answer = await call(pool, server.url(), total=0.3)
            with pytest.raises(TimeoutError):
                await answer.read()
            assert answer.conn.ended  # closed, not kept: the server was still sending
    run(scenario)


def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def answer_then_close(writer: asyncio.StreamWriter) -> None:
        writer.write(whole())
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()  # as uvicorn closes a kept-alive connection idle past its timeout

    async def scenario() -> None:
        async with Scripted([answer_then_close, whole()]) as server, Pool(5, 5) as pool:
            assert await read_all(await call(pool, server.url())) == b'{"ok":1}'
            await asyncio.sleep(0.2)
            assert await read_all(await call(pool, server.url())) == b'{"ok":1}'
            assert server.connections == 2
    run(scenario)


def test_a_call_cancelled_midway_closes_its_connection() -> None:
    async def slow(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def scenario() -> None:
        async with Scripted([slow, whole()]) as server, Pool(5, 5) as pool:
            task = asyncio.ensure_future(call(pool, server.url()))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await read_all(await call(pool, server.url())) == b'{"ok":1}'
            assert server.connections == 2  # the cancelled one was not handed out again
    run(scenario)


@pytest.mark.parametrize(("content_type", "encoding"), [
    ("application/json", "utf-8"), ("text/plain; charset=ISO-8859-1", "iso8859-1"),
    ('text/plain; charset="latin-1"', "iso8859-1"), ("text/plain; charset=nonsense", "utf-8")])
def test_the_encoding_of_an_answer(content_type: str, encoding: str) -> None:
    head = (200, {"content-type": content_type, "content-length": "0"}, True)
    answer = Answer(lambda _: None, None, head, None, None, True)  # type: ignore[arg-type]
    assert answer.get_encoding() == encoding


class Uncoalesced(Resolver):
    """The negative control: every connection looks its name up itself, nothing kept."""

    async def addresses(self, host: str, port: int) -> list[tuple[int, str]]:
        return await self._lookup((host, port))  # never the kept answer, never another's lookup


def dead_name_scenario(resolver: Resolver, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, int]:
    """A dead server's name that takes 3 s to fail, asked for every 50 ms on a loop with 3 lookup
    threads (as the health watch asks for a killed server), then a live server's call: its status (0
    if it raised), what it raised, and how many lookups of the dead name ran."""
    real, dead_lookups = socket.getaddrinfo, []

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "dead.test":
            dead_lookups.append(host)
            time.sleep(3)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real("127.0.0.1" if host == "live.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    async def scenario() -> tuple[int, str]:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(3))
        async with Scripted([whole(), whole()]) as server, Pool(0.3, 5) as pool:
            pool.resolver = resolver
            port = server.url().split(":")[2].split("/")[0]
            assert await read_all(await call(pool, f"http://live.test:{port}/p")) == b'{"ok":1}'
            pool.idle.clear()
            for _ in range(4):  # 1.4 s: each of the control's lookups still holds its thread
                with pytest.raises(Unconnected):
                    await call(pool, "http://dead.test:9/health")
                await asyncio.sleep(0.05)
            resolver.known.clear()  # the live name's answer expired: it needs a lookup thread now
            try:
                return (await call(pool, f"http://live.test:{port}/p")).status, ""
            except Unconnected as err:
                return 0, str(err)
    status, error = run(scenario)
    return status, error, len(dead_lookups)


def test_a_dead_servers_name_does_not_starve_a_live_servers_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    status, error, lookups = dead_name_scenario(Resolver(), monkeypatch)
    assert (status, error, lookups) == (200, "", 1)  # one lookup at a time
    status, error, lookups = dead_name_scenario(Uncoalesced(), monkeypatch)
    assert status == 0 and "no connection within 0.3 s" in error
    assert lookups >= 3  # the control's precondition: every lookup thread waited on the dead name


def test_a_resolved_name_is_kept_then_looked_up_again(monkeypatch: pytest.MonkeyPatch) -> None:
    lookups = []
    real = socket.getaddrinfo

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        lookups.append(host)
        return real("127.0.0.1", *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    async def scenario() -> None:
        resolver = Resolver(keep_s=0.2)
        together = await asyncio.gather(*(resolver.addresses("a.test", 80) for _ in range(5)))
        assert len(lookups) == 1 and all(found == together[0] for found in together)
        await resolver.addresses("a.test", 80)
        assert len(lookups) == 1
        await asyncio.sleep(0.25)
        await resolver.addresses("a.test", 80)
        assert len(lookups) == 2
    run(scenario)
