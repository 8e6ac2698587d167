"""An asyncio HTTP load generator (the gateway's own client, ``gateway/http1.py``): closed-loop
saturation and open-loop Poisson arrivals against one or more base URLs (``sglang-fair lab gateway-speed``).

A request is made by a :data:`RequestOf`: the i-th request's ``(path, JSON body, headers)``, so the
caller decides what is sent and this module only how often. Every request must be answered 200
(anything else raises ``RuntimeError``); its latency is the time from sending to having read the whole
answer. One event loop (uvloop's where installed), one connection pool without a limit: the
generator's own ceiling is what one core of Python reaches, so measure it (e.g. directly against the
server) beside any figure. (With aiohttp's client and ``json`` a chat cost it 0.13 ms of its core.)
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from sglang_fair.gateway.http1 import Pool, Target, header_lines

T = TypeVar("T")

Request = tuple[str, dict[str, Any], dict[str, str]]  # path, JSON body, headers
RequestOf = Callable[[int], Request]  # the i-th request


def run(work: Callable[[], Awaitable[T]]) -> T:
    """``asyncio.run(work())``, in uvloop's event loop where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(work())  # type: ignore[arg-type]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(work())  # type: ignore[arg-type]


def connections() -> Pool:
    """A connection pool for :func:`post` (in the event loop that uses it)."""
    return Pool(connect=30.0, read=60.0)


async def post(pool: Pool, url: str, request: Request) -> float:
    """Send ``request`` to ``url``; its latency in seconds (``RuntimeError`` unless answered 200)."""
    path, body, headers = request
    start = time.perf_counter()
    target = Target(url + path)
    head = target.head(b"POST", header_lines({"Content-Type": "application/json", **headers}))
    resp = await pool.request(target, head, orjson.dumps(body))
    await resp.whole()
    if resp.status != 200:
        raise RuntimeError(f"{url}{path}: HTTP {resp.status}")
    return time.perf_counter() - start


async def saturate(url: str, request_of: RequestOf, concurrency: int, seconds: float) -> float:
    """Requests per second with ``concurrency`` in flight for ``seconds`` (after a 1 s warm-up)."""
    counter = iter(range(1 << 62))
    done = [0]

    async def worker(pool: Pool, end: float, count: bool) -> None:
        while time.perf_counter() < end:
            await post(pool, url, request_of(next(counter)))
            done[0] += count

    async with connections() as pool:
        await asyncio.gather(*(worker(pool, time.perf_counter() + 1.0, False) for _ in range(concurrency)))
        start = time.perf_counter()
        await asyncio.gather(*(worker(pool, start + seconds, True) for _ in range(concurrency)))
        return done[0] / (time.perf_counter() - start)


async def open_loop(paths: dict[str, str], request_of: RequestOf, rate: float, seconds: float
                    ) -> dict[str, list[float]]:
    """Poisson arrivals at ``rate``/s (seed 0) for ``seconds``, taking turns over ``paths`` (name -> base
    URL); latencies (s) per name. First 20 warm-up requests (0..19, in turn, not recorded), so
    connections are open and a server's cache has its prefixes; the measured ones are 100, 101, ..."""
    rng, names = random.Random(0), list(paths)
    out: dict[str, list[float]] = {n: [] for n in names}
    async with connections() as pool:
        for i in range(20):
            await post(pool, paths[names[i % len(names)]], request_of(i))

        async def record(name: str, i: int) -> None:
            out[name].append(await post(pool, paths[name], request_of(i)))

        tasks, start, at, i = [], time.perf_counter(), rng.expovariate(rate), 0
        while at < seconds:
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            tasks.append(asyncio.create_task(record(names[i % len(names)], 100 + i)))
            i, at = i + 1, at + rng.expovariate(rate)
        await asyncio.gather(*tasks)
    return out

