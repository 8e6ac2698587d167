"""How far one ``sglang-fair gateway`` process goes: its saturation throughput, the latency it adds and
where its CPU time goes, against stub servers that answer at once (no SGLang, no model).

    sglang-fair lab gateway-speed [--seconds 10] [--concurrency 64] [--rates 20,100] [--profile]
        [--vs-smg] [--baseline-src DIR] [--workers 1,2] [--json results/speed_gateway.json]

One stub process (aiohttp, two ports: the gateway sees two servers of one worker each) answers
``/server_info``, ``/health``, ``/tokenize`` (one id per word of the prompt) and ``/generate`` and
``/v1/chat/completions`` (a fixed 8-token answer) without waiting; with ``--tokenizer DIR`` its
``/tokenize`` is that tokenizer's, rendering a chat as SGLang does, and the gateway is measured once
more with ``--tokenizer DIR`` (tokenizing in the gateway, no round trip). The gateway (default policy,
``fair_cache_aware``) runs in its own process; on a machine with two or more cores it is pinned to
core 0 and the stub and this load generator to core 1. Requests are non-streamed chat completions of
a ~200-word prompt (one of 16 shared 180-word prefixes plus a question: the policy's tree has work to
do), which cost the gateway a ``/tokenize`` round trip, and ``/generate`` with ``input_ids``, which
do not.

1. Saturation: ``--concurrency`` requests kept in flight for ``--seconds``, through the gateway and
   directly to the stub (the stub and load generator's own ceiling); requests/s.
2. Added latency: open-loop Poisson arrivals at each of ``--rates`` per second for ``--seconds``,
   alternating direct and through the gateway; p50/p99 of each and their difference.
Every gateway measured gets the same bodies (chats carry ``"model": "stub"``, which SMG requires):
this checkout's gateway; with ``--baseline-src DIR`` also the gateway of another checkout (e.g. a
worktree of the branch before a change), run by this Python; with ``--vs-smg`` also SGLang's Rust
gateway SMG (``pip install smg==1.13.0``, an optional benchmark dependency; ``--smg PATH``) with
``--policy cache_aware``. Each in turn alone on core 0; the direct figures are measured once.

``--workers 1,2`` measures this checkout's gateway once per process count (``gateway --workers N``)
instead, nothing pinned (N processes need N cores, which the stub and load generator share on a small
machine). Every row records the CPU each part took during its chat saturation run (cores busy:
CPU seconds over wall seconds, from ``/proc``; the gateway's processes summed) and the gateway's
resident memory, so a ratio between rows can be read against what the stub and load generator used.

3. ``--profile``: py-spy (``pip install py-spy``; ``--py-spy PATH``) samples the gateway during a
   saturation run of chats: the share of its busy samples under each step of the request's path
   (inclusive), and by the library its innermost frame is in (exclusive, sums to 1).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from sglang_fair.harness.server import free_ports, stop, wait_ready

PREFIXES = [" ".join(f"w{p}x{i}" for i in range(180)) for p in range(16)]
ANSWER = {"id": "c", "object": "chat.completion", "model": "stub",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "x" * 8},
                       "finish_reason": "length"}],
          "usage": {"prompt_tokens": 200, "completion_tokens": 8, "total_tokens": 208}}
GENERATED = {"text": "x" * 8, "meta_info": {"prompt_tokens": 200, "completion_tokens": 8}}
# inclusive shares of the gateway's busy samples: (label, a frame's text contains this)
STEPS = (("Gateway.relay (the whole handler)", "relay (sglang_fair/gateway/app.py"),
         ("  prompt_tokens (the /tokenize round trip)", "prompt_tokens (sglang_fair/gateway/prompt.py"),
         ("  LocalTokenizer.ids (tokenizing in the gateway)", "ids (sglang_fair/gateway/local_tokens.py"),
         ("  GatewayRouter.route (the policy's decision)", "route (sglang_fair/gateway/routing.py"),
         ("  Upstream.send (the request to the server)", "send (sglang_fair/gateway/upstream.py"),
         ("  Gateway._whole (read the answer, policy finish)", "_whole (sglang_fair/gateway/app.py"))
# exclusive shares: the sample's innermost frame's file names the library (first match)
LIBRARIES = (("json", ("json/",)), ("uvicorn + h11 (HTTP server)", ("uvicorn/", "h11/", "httptools")),
             ("fastapi + starlette + anyio", ("fastapi/", "starlette/", "anyio/", "pydantic")),
             ("aiohttp + yarl + multidict (client)", ("aiohttp/", "yarl/", "multidict/")),
             ("routing policy + tree (sglang_fair.routing/core)",
              ("sglang_fair/routing/", "sglang_fair/core/")),
             ("gateway's own code (sglang_fair)", ("sglang_fair/",)),
             ("asyncio event loop, sockets", ("asyncio/", "uvloop", "selectors", "socket")))


def stub_app(tokenizer: str = "") -> web.Application:
    """The stub server: every answer at once; ``/tokenize`` with the tokenizer at ``tokenizer`` (as
    SGLang renders a plain chat) if given, else one id per word."""
    encode = real_tokenize(tokenizer) if tokenizer else None
    async def server_info(_: web.Request) -> web.Response:
        return web.json_response({"served_model_name": "stub", "model_path": "/stub", "dp_size": 1})

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        if encode is not None:
            ids = encode(body)
            return web.json_response({"tokens": ids, "count": len(ids)})
        text = body.get("prompt") or " ".join(str(m.get("content")) for m in body.get("messages", []))
        ids = [zlib.crc32(w.encode()) & 0xFFFF for w in str(text).split()]
        return web.json_response({"tokens": ids, "count": len(ids)})

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(ANSWER)

    async def generate(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(GENERATED)

    app = web.Application()
    app.add_routes([web.get("/server_info", server_info), web.get("/health", health),
                    web.post("/tokenize", tokenize), web.post("/v1/chat/completions", chat),
                    web.post("/generate", generate)])
    return app


def real_tokenize(path: str) -> Callable[[dict[str, Any]], list[int]]:
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
    runner = web.AppRunner(stub_app(tokenizer), access_log=None)
    await runner.setup()
    for port in ports:
        await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


def request_of(kind: str, i: int) -> tuple[str, dict[str, Any]]:
    """The i-th request of ``kind`` (chat: text to tokenize; ids: /generate with input_ids)."""
    prefix = PREFIXES[i % len(PREFIXES)]
    if kind == "chat":
        message = {"role": "user", "content": f"{prefix} question {i} ok"}
        return "/v1/chat/completions", {"model": "stub", "messages": [message], "max_tokens": 8}
    ids = [zlib.crc32(w.encode()) & 0xFFFF for w in prefix.split()] + [i & 0xFFFF, 7]
    return "/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 8}}


async def one(session: aiohttp.ClientSession, url: str, kind: str, i: int) -> float:
    path, body = request_of(kind, i)
    start = time.perf_counter()
    async with session.post(url + path, json=body, headers={"X-Client-Id": f"c{i % 8}"}) as resp:
        await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{url}{path}: HTTP {resp.status}")
    return time.perf_counter() - start


async def saturate(url: str, kind: str, concurrency: int, seconds: float) -> float:
    """Requests per second with ``concurrency`` in flight for ``seconds`` (after a 1 s warm-up)."""
    counter = iter(range(1 << 62))
    done = [0]

    async def worker(session: aiohttp.ClientSession, end: float, count: bool) -> None:
        while time.perf_counter() < end:
            await one(session, url, kind, next(counter))
            done[0] += count

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(worker(session, time.perf_counter() + 1.0, False) for _ in range(concurrency)))
        start = time.perf_counter()
        await asyncio.gather(*(worker(session, start + seconds, True) for _ in range(concurrency)))
        return done[0] / (time.perf_counter() - start)


def run_saturate(url: str, kind: str, args: argparse.Namespace) -> float:
    return asyncio.run(saturate(url, kind, args.concurrency, args.seconds))


async def open_loop(paths: dict[str, str], kind: str, rate: float, seconds: float) -> dict[str, list[float]]:
    """Poisson arrivals at ``rate``/s, taking turns over ``paths``; latencies (s) per path."""
    rng, names = random.Random(0), list(paths)
    out: dict[str, list[float]] = {n: [] for n in names}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for i in range(20):  # warm-up: connections open, the tree has its prefixes
            await one(session, paths[names[i % 2]], kind, i)

        async def record(name: str, i: int) -> None:
            out[name].append(await one(session, paths[name], kind, i))

        tasks, start, at, i = [], time.perf_counter(), rng.expovariate(rate), 0
        while at < seconds:
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            tasks.append(asyncio.create_task(record(names[i % len(names)], 100 + i)))
            i, at = i + 1, at + rng.expovariate(rate)
        await asyncio.gather(*tasks)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``; [] where it is not)."""
    out, todo = [], [pid]
    while todo:
        here = todo.pop()
        out.append(here)
        try:
            for task in os.listdir(f"/proc/{here}/task"):
                with open(f"/proc/{here}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (0 for one gone)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return round(total * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def busy_cores(parts: dict[str, int], run: Callable[[], float]) -> tuple[float, dict[str, float]]:
    """Run ``run``; its result and the cores each part (name -> the root pid of its process tree; this
    process, the load generator, without its children) kept busy meanwhile."""
    trees = {name: [pid] if pid == os.getpid() else tree(pid) for name, pid in parts.items()}
    before = {name: cpu_seconds(pids) for name, pids in trees.items()}
    start = time.perf_counter()
    result = run()
    wall = time.perf_counter() - start
    return result, {name: round((cpu_seconds(trees[name]) - before[name]) / wall, 2) for name in trees}


def pin(pid: int, core: int) -> None:
    if (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(pid, {core})


def start(cmd: list[str], log: Path, url: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        wait_ready(url, proc, 60)
        answers(url, proc)
    except (RuntimeError, TimeoutError) as err:
        stop(proc)
        raise RuntimeError(f"{cmd[:4]} did not start: {err}\n{log.read_text()[-2000:]}") from None
    return proc


def all_ready(log: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Wait until the gateway's log says it is ready (with ``--workers N``: every process)."""
    deadline = time.monotonic() + timeout
    while b"ready on" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the gateway did not say it is ready:\n{log.read_text()[-2000:]}")
        time.sleep(0.2)


def answers(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Wait until a chat through ``url`` is answered 200 (a gateway may be healthy before its workers
    are registered)."""
    async def once() -> bool:
        async with aiohttp.ClientSession() as session:
            try:
                await one(session, url, "chat", 0)
                return True
            except (RuntimeError, aiohttp.ClientError):
                return False

    deadline = time.monotonic() + timeout
    while not asyncio.run(once()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} does not answer chats")
        time.sleep(0.5)


def gateway_cmds(args: argparse.Namespace, stubs: list[str], port: int
                 ) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """The gateways to measure: name -> (command, environment)."""
    ours = [sys.executable, "-m", "sglang_fair.cli", "gateway", "--worker-urls", ",".join(stubs),
            "--port", str(port)]
    cmds: dict[str, tuple[list[str], dict[str, str] | None]] = {}
    if args.workers:
        return {f"sglang-fair (this checkout, --workers {n})": ([*ours, "--workers", str(n)], None)
                for n in args.workers}
    if args.baseline_src:
        src = args.baseline_src.resolve()
        env = {**os.environ, "PYTHONPATH": f"{src / 'python'}{os.pathsep}{src / 'router'}"}
        cmds[f"sglang-fair ({args.baseline_name or src.name})"] = (ours, env)
    cmds["sglang-fair (this checkout)"] = (ours, None)
    if args.tokenizer:
        cmds["sglang-fair (this checkout, --tokenizer)"] = ([*ours, "--tokenizer", str(args.tokenizer)], None)
    if args.vs_smg:
        smg = [args.smg, "launch", "--worker-urls", *stubs, "--policy", "cache_aware", "--port", str(port),
               "--prometheus-port", str(free_ports(1)[0]), "--log-level", "warn"]
        cmds["SMG 1.13 cache_aware"] = (smg, None)
    return cmds


def profile(py_spy: str, pid: int, seconds: float, run: Callable[[], float], out: Path,
            keep: Path | None = None) -> dict[str, float]:
    """Sample ``pid`` with py-spy while ``run`` loads it; inclusive share of busy samples per part (the
    raw samples copied to ``keep``, if given)."""
    spy = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                            "--rate", "250", "--format", "raw", "--output", str(out), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    run()
    spy.wait(timeout=seconds + 60)
    if keep is not None:
        shutil.copyfile(out, keep)
    stacks: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            stacks[stack] += int(count)
    total = sum(stacks.values()) or 1
    shares = {label: sum(n for s, n in stacks.items() if needle in s) / total for label, needle in STEPS}
    libraries: Counter[str] = Counter()
    for stack, n in stacks.items():
        leaf = stack.rsplit(";", 1)[-1]
        label = next((name for name, needles in LIBRARIES if any(x in leaf for x in needles)), "other")
        libraries[label] += n
    shares.update({f"innermost in {label}": n / total for label, n in libraries.most_common()})
    return {k: round(v, 3) for k, v in shares.items()} | {"busy samples": total}


def measure_gateway(args: argparse.Namespace, url: str, direct: str, parts: dict[str, int]) -> dict[str, Any]:
    """Saturation and added latency of the gateway at ``url`` (``direct``: the stub it routes to); the
    cores each of ``parts`` (name -> pid) kept busy during the chat saturation run."""
    out: dict[str, Any] = {}
    for kind in ("chat", "ids"):
        rps, cores = busy_cores(parts, functools.partial(run_saturate, url, kind, args))
        out[f"max_rps_{kind}"] = round(rps, 1)
        print(f"  saturation {kind:4}: {rps:8.1f} requests/s; cores busy: {cores}", flush=True)
        if kind == "chat":
            out["cores_busy_at_chat_saturation"] = cores
            out["gateway_rss_mib"] = rss_mib(tree(parts["gateway"]))
    out["open_loop_ms"] = {}
    for rate in args.rates:
        lat = asyncio.run(open_loop({"direct": direct, "gateway": url}, "chat", rate, args.seconds))
        row = {name: {"n": len(v), "p50": round(pct(v, 0.5) * 1e3, 2),
                      "p99": round(pct(v, 0.99) * 1e3, 2)} for name, v in lat.items()}
        row["added"] = {q: round(row["gateway"][q] - row["direct"][q], 2) for q in ("p50", "p99")}
        out["open_loop_ms"][rate] = row
        print(f"  open loop {rate}/s chat (ms): " + "; ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    return out


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    ports = free_ports(3)
    stubs = [f"http://127.0.0.1:{p}" for p in ports[:2]]
    stub_cmd = [sys.executable, __file__, "--stub-ports", f"{ports[0]},{ports[1]}"]
    if args.tokenizer:
        stub_cmd += ["--tokenizer", str(args.tokenizer)]
    stub = start(stub_cmd, tmp / "stub.log", stubs[0])
    pinned = not args.workers
    if pinned:
        pin(stub.pid, 1)
        pin(os.getpid(), 1)
    gw_url = f"http://127.0.0.1:{ports[2]}"
    result: dict[str, Any] = {"cores": os.cpu_count(), "load_avg_1m_before": os.getloadavg()[0],
                              "seconds": args.seconds, "concurrency": args.concurrency, "pinned": pinned,
                              "gateways": {}}
    parts = {"stub": stub.pid, "load generator": os.getpid()}
    try:
        for kind in ("chat", "ids"):
            rps, cores = busy_cores(parts, functools.partial(run_saturate, stubs[0], kind, args))
            result[f"max_rps_{kind}_direct"] = round(rps, 1)
            result[f"cores_busy_{kind}_direct"] = cores
            print(f"direct to the stub: saturation {kind:4}: {rps:8.1f} requests/s; cores busy: {cores}",
                  flush=True)
        for i, (name, (cmd, env)) in enumerate(gateway_cmds(args, stubs, ports[2]).items()):
            print(f"{name}:", flush=True)
            gateway = start(cmd, tmp / f"gateway{i}.log", gw_url, env)
            try:
                if pinned:
                    pin(gateway.pid, 0)
                else:
                    all_ready(tmp / f"gateway{i}.log", gateway)
                row = result["gateways"][name] = measure_gateway(args, gw_url, stubs[0],
                                                                 {"gateway": gateway.pid, **parts})
                row["load_avg_1m"] = os.getloadavg()[0]
                if args.profile and "(this checkout" in name:
                    keep = args.json.with_suffix(f".{i}.pyspy.txt") if args.json else None
                    def load() -> float:
                        return asyncio.run(saturate(gw_url, "chat", args.concurrency, args.seconds))

                    shares = row["profile"] = profile(args.py_spy, gateway.pid, args.seconds, load,
                                                      tmp / "gateway.pyspy.txt", keep)
                    for part, share in shares.items():
                        print(f"  {share:7.3f}  {part}")
            finally:
                stop(gateway)
    finally:
        result["load_avg_1m_after"] = os.getloadavg()[0]
        stop(stub)
    return result


def table(result: dict[str, Any]) -> str:
    """The gateways side by side (markdown)."""
    rates = list(next(iter(result["gateways"].values()))["open_loop_ms"]) if result["gateways"] else []
    head = ["gateway (one core)" if result.get("pinned", True) else "gateway (nothing pinned)",
            "chat req/s", "ids req/s", *(f"added p50 / p99 ms at {r:g}/s" for r in rates),
            "cores busy at chat saturation (gateway / stub / load generator)", "gateway RSS MiB"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines.append(f"| direct to the stub | {result['max_rps_chat_direct']:,.0f} | "
                 f"{result['max_rps_ids_direct']:,.0f} |" + " |" * len(rates)
                 + f" - / {busy(result.get('cores_busy_chat_direct', {}))} | |")
    for name, row in result["gateways"].items():
        added = [row["open_loop_ms"][r]["added"] for r in rates]
        cores = row.get("cores_busy_at_chat_saturation", {})
        lines.append(f"| {name} | {row['max_rps_chat']:,.0f} | {row['max_rps_ids']:,.0f} | "
                     + " | ".join(f"{a['p50']:.2f} / {a['p99']:.2f}" for a in added)
                     + f" | {cores.get('gateway', '-')} / {busy(cores)} | {row.get('gateway_rss_mib', '')} |")
    return "\n".join(lines)


def busy(cores: dict[str, float]) -> str:
    return f"{cores.get('stub', '-')} / {cores.get('load generator', '-')}"


def beside_python(name: str) -> str:
    """The executable ``name`` of this Python's environment, else on the PATH ('' if neither)."""
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name) or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight at saturation")
    parser.add_argument("--rates", default="20,100",
                        help="open-loop requests/s, both paths together; comma-separated, one run each")
    parser.add_argument("--profile", action="store_true", help="sample the gateway with py-spy")
    parser.add_argument("--py-spy", default=beside_python("py-spy"), help="py-spy executable")
    parser.add_argument("--vs-smg", action="store_true",
                        help="also measure SGLang's Rust gateway SMG (pip install smg==1.13.0)")
    parser.add_argument("--smg", default=beside_python("smg"),
                        help="SMG's executable (with --vs-smg)")
    parser.add_argument("--baseline-src", type=Path,
                        help="also measure the gateway of this checkout (its python/ and router/)")
    parser.add_argument("--baseline-name", help="its name in the table (default: the folder's name)")
    parser.add_argument("--tokenizer", type=Path,
                        help="a model directory (scripts/make_tiny_model.py): the stub's /tokenize uses its "
                             "tokenizer; the gateway is also measured with --tokenizer (no /tokenize call)")
    parser.add_argument("--workers", default="",
                        help="comma-separated process counts (e.g. 1,2): measure this checkout's gateway "
                             "with --workers N for each, side by side, nothing pinned (instead of the "
                             "other gateways)")
    parser.add_argument("--json", type=Path, help="write the figures here (e.g. results/speed_gateway.json)")
    parser.add_argument("--stub-ports", help=argparse.SUPPRESS)  # internal: run as the stub
    args = parser.parse_args()
    if args.stub_ports:
        asyncio.run(serve_stub([int(p) for p in args.stub_ports.split(",")], str(args.tokenizer or "")))
        return 0
    try:
        args.rates = [float(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        parser.error(f"--rates {args.rates!r}: give numbers, e.g. 20,100")
    try:
        args.workers = [int(n) for n in args.workers.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--workers {args.workers!r}: give process counts, e.g. 1,2")
    if any(n < 1 for n in args.workers):
        parser.error("--workers: every process count must be >= 1")
    if args.workers and (args.vs_smg or args.baseline_src or args.tokenizer or args.profile):
        parser.error("--workers measures this checkout's gateway alone: leave out --vs-smg, --baseline-src, "
                     "--tokenizer and --profile")
    if args.seconds < 2 or args.concurrency < 1 or not args.rates or min(args.rates) <= 0:
        parser.error("--seconds must be >= 2, --concurrency >= 1, every rate > 0")
    if args.profile and not (args.py_spy and Path(args.py_spy).exists()):
        parser.error("--profile needs py-spy (pip install py-spy, or give --py-spy PATH)")
    if args.vs_smg and not Path(args.smg).is_file():
        parser.error(f"--vs-smg needs SMG, SGLang's Rust gateway, and {args.smg!r} is not there: "
                     "pip install smg==1.13.0 (an optional benchmark dependency), or give --smg PATH")
    if args.baseline_src and not (args.baseline_src / "python" / "sglang_fair").is_dir():
        parser.error(f"--baseline-src {args.baseline_src}: no python/sglang_fair there")
    with tempfile.TemporaryDirectory(prefix="speed-gateway-") as tmp:
        result = measure(args, Path(tmp))
    print(json.dumps(result))
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
