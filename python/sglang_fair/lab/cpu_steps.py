"""Measure the step times of a running SGLang server over a grid of batch shapes (for sim/fit.py).

    sglang-fair lab cpu-steps --url http://127.0.0.1:30000 --vocab 380 > steps.csv
    python -m sglang_fair.sim.fit steps.csv > model.json

Measured from the client over /generate (token ids, streamed, ignore_eos), one shape at a time on an
otherwise idle server:
- decode: B requests sent together, prompt L, 48 new tokens; once all B decode, each request's
  inter-token time over the window where all B run is one decode step of B requests whose KV holds
  B * (L + tokens so far) tokens (the median over the B requests is kept);
- prefill: one request of P new tokens after a cached prefix of C tokens (sent once before to fill
  the cache) and max_new_tokens=1: its time to first token is one prefill step plus the request's
  trip through the HTTP server and tokenizer manager (a few ms, which the fit puts in ``fixed``).
  A prefill of more new tokens than the server's chunked-prefill size (read from /get_server_info)
  would be several steps: those shapes are skipped.
Prints ``requests,new_tokens,context_tokens,attention_pairs,seconds,prefill,prefix_pairs`` rows
(sim/fit.py's format).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass

import aiohttp


@dataclass(frozen=True)
class Grid:
    """The shapes measured: decode of each batch size at each prompt length, prefill of each new
    length after each cached prefix."""

    batches: tuple[int, ...]
    lengths: tuple[int, ...]
    cached: tuple[int, ...]
    new: tuple[int, ...]


GRIDS = {"short": Grid((1, 2, 4, 8, 16, 32), (32, 256, 1024), (0, 512, 2048), (16, 64, 256, 1024, 2048)),
         # fits a 60,000-token pool; new tokens within SGLang's CPU chunk (4,096)
         "long": Grid((1, 2, 4), (4096, 12288), (0, 8192, 16384, 24576), (1024, 4096))}


async def stream(session: aiohttp.ClientSession, url: str, ids: list[int],
                 new: int) -> list[tuple[float, int]]:
    """(time, completion tokens so far) per streamed chunk; the first entry is the send time."""
    body = {"input_ids": ids, "stream": True,
            "sampling_params": {"max_new_tokens": new, "ignore_eos": True, "temperature": 0}}
    out = [(time.perf_counter(), 0)]
    async with session.post(url + "/generate", json=body) as resp:
        resp.raise_for_status()
        async for raw in resp.content:
            line = raw.strip()
            if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
                meta = json.loads(line[5:])["meta_info"]
                out.append((time.perf_counter(), int(meta["completion_tokens"])))
    return out


def ids(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(3, vocab) for _ in range(n)]


async def decode(session: aiohttp.ClientSession, url: str, rng: random.Random, vocab: int, b: int,
                 length: int, new: int = 48) -> str:
    runs = await asyncio.gather(*(stream(session, url, ids(rng, length, vocab), new) for _ in range(b)))
    start = max(r[1][0] for r in runs)  # every request has its first token
    end = min(r[-1][0] for r in runs)  # none has finished
    per = []
    for r in runs:
        inside = [(t, k) for t, k in r[1:] if start <= t <= end]
        if len(inside) >= 2 and inside[-1][1] > inside[0][1]:
            per.append((inside[-1][0] - inside[0][0]) / (inside[-1][1] - inside[0][1]))
    if not per:
        return ""
    mid = statistics.median(k for r in runs for t, k in r[1:] if start <= t <= end)
    return f"{b},{b},{b * (length + int(mid))},0,{statistics.median(per):.6f},0,0"


async def prefill(session: aiohttp.ClientSession, url: str, rng: random.Random, vocab: int, cached: int,
                  new: int) -> str:
    prefix = ids(rng, cached, vocab)
    if cached:
        await stream(session, url, prefix, 1)
    r = await stream(session, url, prefix + ids(rng, new, vocab), 1)
    pairs = new * (cached + new / 2)
    return f"1,{new},{cached + new},{pairs:.0f},{r[1][0] - r[0][0]:.6f},1,{cached * cached / 2:.0f}"


async def chunk_size(session: aiohttp.ClientSession, url: str) -> int | None:
    """The server's chunked-prefill size, None where it does not say (not SGLang, or no chunking)."""
    try:
        async with session.get(url + "/get_server_info") as resp:
            size = (await resp.json()).get("chunked_prefill_size") if resp.status == 200 else None
    except (aiohttp.ClientError, ValueError):
        return None
    return size if isinstance(size, int) and size > 0 else None


async def measure() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--vocab", type=int, required=True, help="token ids are drawn from [3, vocab)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--grid", choices=sorted(GRIDS), default="short",
                    help="short: the shapes of the ToT/judge runs; long: prompts of 4-12K tokens (qa's "
                         "documents; needs a model whose context holds them)")
    args = ap.parse_args()
    grid = GRIDS[args.grid]
    rng = random.Random(0)
    print("requests,new_tokens,context_tokens,attention_pairs,seconds,prefill,prefix_pairs")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as s:
        chunk = await chunk_size(s, args.url)
        new_sizes = [n for n in grid.new if chunk is None or n <= chunk]
        if len(new_sizes) < len(grid.new):
            print(f"skipping prefills of more than the server's chunk ({chunk} tokens): several steps each",
                  file=sys.stderr)
        await stream(s, args.url, ids(rng, 16, args.vocab), 4)  # warm up
        for _ in range(args.repeat):
            for b in grid.batches:
                for length in grid.lengths:
                    row = await decode(s, args.url, rng, args.vocab, b, length)
                    if row:
                        print(row, flush=True)
            for cached in grid.cached:
                for new in new_sizes:
                    print(await prefill(s, args.url, rng, args.vocab, cached, new), flush=True)
    print("done", file=sys.stderr)
    return 0


def main() -> int:
    return asyncio.run(measure())


if __name__ == "__main__":
    raise SystemExit(main())
