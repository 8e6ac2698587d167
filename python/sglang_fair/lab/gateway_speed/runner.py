"""The measurements of ``sglang-fair lab gateway-speed``: start the stub and each gateway in turn, load
them (:mod:`sglang_fair.harness.async_load`), count the cores each part kept busy
(:mod:`sglang_fair.harness.proc_stats`) and, with ``--profile``, sample the gateway (:mod:`.pyspy`).

:func:`measure` takes the lab's parsed flags and returns the figures as one JSON-ready dict (what
``--json`` writes and :func:`sglang_fair.lab.gateway_speed.table` prints).
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from sglang_fair.gateway.http1 import HttpError
from sglang_fair.harness.async_load import Request, connections, open_loop, post, run, saturate
from sglang_fair.harness.proc import Proc, free_ports, stop
from sglang_fair.harness.proc_stats import busy_cores, pin, rss_mib, tree
from sglang_fair.lab.gateway_speed.pyspy import profile
from sglang_fair.metrics import percentile

PROSE = ("the a of to and in that is for it with as on be by this are from at or an not we which "
         "have will can all their has more one been would other they when there about into time "
         "each new first may these only than some two also like any after most over such work "
         "between through system request prefix cache worker client share fair queue model token "
         "server memory answer question service")
PREFIXES = {  # 16 shared 180-word prefixes: codes (w0x1 ...: 1-1.7 characters a token) or English words
    "codes": [" ".join(f"w{p}x{i}" for i in range(180)) for p in range(16)],
    "prose": [" ".join(random.Random(p).choices(PROSE.split(), k=180)) for p in range(16)]}
STUB = "sglang_fair.lab.gateway_speed.stub"  # run as ``python -m``
OPEN_LOOP_KEYS = {"chat": "open_loop_ms", "ids": "open_loop_ms_ids"}  # the figures' keys, per request kind


def request_of(kind: str, i: int, prompts: str = "codes") -> Request:
    """The i-th request of ``kind`` (chat: text to tokenize; ids: /generate with input_ids), as one of
    8 clients, its prefix one of ``PREFIXES[prompts]``."""
    prefix = PREFIXES[prompts][i % len(PREFIXES[prompts])]
    headers = {"X-Client-Id": f"c{i % 8}"}
    if kind == "chat":
        message = {"role": "user", "content": f"{prefix} question {i} ok"}
        return "/v1/chat/completions", {"model": "stub", "messages": [message], "max_tokens": 8}, headers
    ids = [zlib.crc32(w.encode()) & 0xFFFF for w in prefix.split()] + [i & 0xFFFF, 7]
    return "/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 8}}, headers


def run_saturate(url: str, kind: str, args: argparse.Namespace) -> float:
    requests = functools.partial(request_of, kind, prompts=args.prompts)
    return run(lambda: saturate(url, requests, args.concurrency, args.seconds))


def start(cmd: list[str], log: Path, url: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``cmd`` (:class:`~sglang_fair.harness.proc.Proc`) and wait until it answers a chat."""
    proc = Proc(" ".join(cmd[:4]), cmd, url, log, env if env is not None else dict(os.environ))
    log.write_bytes(b"")
    popen = proc.start()
    try:
        proc.wait_ready(60)
        answers(url, popen)
    except RuntimeError:
        proc.stop()
        raise
    return popen


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
        async with connections() as pool:
            try:
                await post(pool, url, request_of("chat", 0))
                return True
            except (RuntimeError, HttpError, TimeoutError):
                return False

    deadline = time.monotonic() + timeout
    while not run(once):
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
        if args.tokenizer:
            cmds[f"sglang-fair ({args.baseline_name or src.name}, --tokenizer)"] = (
                [*ours, "--tokenizer", str(args.tokenizer)], env)
    cmds["sglang-fair (this checkout, --tokenizer none)"] = ([*ours, "--tokenizer", "none"], None)
    if args.tokenizer:  # the stubs' /server_info names it: the default, auto, finds it
        cmds["sglang-fair (this checkout, default: --tokenizer auto)"] = (ours, None)
    if args.vs_smg:
        smg = [args.smg, "launch", "--worker-urls", *stubs, "--policy", "cache_aware", "--port", str(port),
               "--prometheus-port", str(free_ports(1)[0]), "--log-level", "warn"]
        cmds["SMG 1.13 cache_aware"] = (smg, None)
    return cmds


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
            out["gateway_cpu_ms_per_chat"] = round(cores["gateway"] / rps * 1e3, 3) if rps else None
            out["gateway_rss_mib"] = rss_mib(tree(parts["gateway"]))
    for kind in ("chat", "ids") if args.ids_latency else ("chat",):
        key = OPEN_LOOP_KEYS[kind]
        out[key] = {}
        requests = functools.partial(request_of, kind, prompts=args.prompts)
        for rate in args.rates:
            lat = run(functools.partial(open_loop, {"direct": direct, "gateway": url}, requests, rate,
                                        args.seconds))
            row = {name: {"n": len(v), "p50": round(percentile(v, 50, nearest_rank=True) * 1e3, 2),
                          "p99": round(percentile(v, 99, nearest_rank=True) * 1e3, 2)}
                   for name, v in lat.items()}
            row["added"] = {q: round(row["gateway"][q] - row["direct"][q], 2) for q in ("p50", "p99")}
            out[key][rate] = row
            print(f"  open loop {rate}/s {kind} (ms): " + "; ".join(f"{k} {v}" for k, v in row.items()),
                  flush=True)
    return out


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Every measurement of the lab's flags ``args`` (logs and py-spy's raw samples under ``tmp``)."""
    ports = free_ports(3)
    stubs = [f"http://127.0.0.1:{p}" for p in ports[:2]]
    stub_cmd = [sys.executable, "-m", STUB, "--ports", f"{ports[0]},{ports[1]}"]
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
                              "prompts": args.prompts, "gateways": {}}
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
                if args.profile and name.startswith("sglang-fair"):
                    keep = args.json.with_suffix(f".{i}.pyspy.txt") if args.json else None
                    if keep is not None:
                        keep.parent.mkdir(parents=True, exist_ok=True)
                    shares = row["profile"] = profile(args.py_spy, gateway.pid, args.seconds,
                                                      functools.partial(run_saturate, gw_url, "chat", args),
                                                      tmp / "gateway.pyspy.txt", keep)
                    for part, share in shares.items():
                        print(f"  {share:7.3f}  {part}")
            finally:
                stop(gateway)
    finally:
        result["load_avg_1m_after"] = os.getloadavg()[0]
        stop(stub)
    return result
