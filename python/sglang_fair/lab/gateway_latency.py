"""The latency ``sglang-fair gateway`` adds, on the CPU engine; prints p50/p99 direct vs through the gateway.

    sglang-fair lab gateway-latency --model DIR [--rate 4] [--duration 30] [--max-tokens 8] [--tokenizer none]

One ``sglang-fair serve`` (one worker, ``--gateway-token-file``) and one gateway in front of it only,
so both paths reach the same worker. Requests arrive open-loop (Poisson, ``--rate`` per second in
all) and take turns, direct and through the gateway, so both see the same load; each is a streamed
chat completion with a prompt of its own (``max_tokens`` output tokens, ``ignore_eos``). Per path:
time to the first content chunk (TTFT) and to the last byte (end to end). A few requests per path
warm up first and are not counted. The gateway runs with its default ``--tokenizer auto`` (it finds
``DIR`` and tokenizes the chats itself) unless ``--tokenizer`` says otherwise (``none``: every chat is
tokenized by the server's ``/tokenize``); what it did is printed. Needs SGLang
(scripts/install_sglang_cpu.sh) and the gateway extra.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import aiohttp

from sglang_fair.harness.gateway import running_gateway
from sglang_fair.harness.server import get_json, running_server
from sglang_fair.metrics import percentile

SERVER = ("--max-running-requests", "16", "--max-total-tokens", "8000")
TOKEN = "bench-gateway-token-0123456789abcdef"


async def one(session: aiohttp.ClientSession, url: str, i: int, max_tokens: int) -> tuple[float, float]:
    """(TTFT, end to end) in seconds of one streamed chat completion."""
    body = {"messages": [{"role": "user", "content": f"request {i}: tell a story about {i * 7919 % 1000}"}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
    start = time.perf_counter()
    first = None
    async with session.post(url + "/v1/chat/completions", json=body,
                            headers={"X-Client-Id": f"c{i % 4}"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}: {await resp.text()}")
        async for line in resp.content:
            if first is None and line.startswith(b"data: {") and b'"content":"' in line \
                    and b'"content":""' not in line:
                first = time.perf_counter()
    end = time.perf_counter()
    return (first or end) - start, end - start


def pct(values: list[float], q: float) -> float:
    return percentile(values, 100 * q, nearest_rank=True)


async def load(paths: dict[str, str], rate: float, duration: float, max_tokens: int,
               seed: int) -> dict[str, list[tuple[float, float]]]:
    rng = random.Random(seed)
    names = list(paths)
    results: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
        for i, name in enumerate(names * 3):  # warm-up, not counted
            await one(session, paths[name], -1 - i, max_tokens)

        async def record(name: str, i: int) -> None:
            results[name].append(await one(session, paths[name], i, max_tokens))

        tasks, start, i = [], time.perf_counter(), 0
        at = rng.expovariate(rate)
        while at < duration:
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            tasks.append(asyncio.create_task(record(names[i % len(names)], i)))
            i += 1
            at += rng.expovariate(rate)
        await asyncio.gather(*tasks)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--rate", type=float, default=4.0, help="requests per second, both paths together")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", default="auto", help="the gateway's --tokenizer (none: /tokenize)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    (tmp / "token").write_text(TOKEN)
    trust = ("--gateway-token-file", str(tmp / "token"))
    with ExitStack() as stack:
        server = stack.enter_context(running_server(args.model, (*SERVER, *trust), tmp / "server.log"))
        gateway = stack.enter_context(running_gateway([server], (*trust, "--tokenizer", args.tokenizer),
                                                      tmp / "gateway.log"))
        results = asyncio.run(load({"direct": server, "gateway": gateway}, args.rate, args.duration,
                                   args.max_tokens, args.seed))
        tokens = get_json(gateway + "/gateway/state").get("local_tokenizer")
    here = f"{tokens['verdict']}; tokenized here {tokens.get('local', 0)}" if tokens else "none: /tokenize"
    print(f"the gateway's tokenizer (--tokenizer {args.tokenizer}): {here}")
    print(f"rate {args.rate}/s for {args.duration:.0f} s (half each path), streamed chat, "
          f"{args.max_tokens} output tokens, one CPU worker")
    print(f"{'path':8} {'n':>4} {'TTFT p50':>9} {'TTFT p99':>9} {'e2e p50':>9} {'e2e p99':>9}  (ms)")
    rows = {}
    for name, values in results.items():
        ttft, e2e = [v[0] * 1e3 for v in values], [v[1] * 1e3 for v in values]
        rows[name] = [pct(ttft, 0.5), pct(ttft, 0.99), pct(e2e, 0.5), pct(e2e, 0.99)]
        print(f"{name:8} {len(values):4d} " + " ".join(f"{x:9.1f}" for x in rows[name]))
    added = [g - d for g, d in zip(rows["gateway"], rows["direct"], strict=True)]
    print(f"{'added':8} {'':4} " + " ".join(f"{x:9.1f}" for x in added))
    print(json.dumps({"rate": args.rate, "duration": args.duration, "max_tokens": args.max_tokens,
                      "tokenizer": args.tokenizer, "local_tokenizer": tokens, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
