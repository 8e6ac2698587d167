"""Check the compose ``fleet-cpu`` profile (two servers, two gateway replicas in front) as a user and an
operator would (scripts/docker_check.sh: steps fleet-probe, replicas, health, failover, taken-back).

    sglang-fair lab fleet-probe --gateway http://127.0.0.1:30080 --servers URL_A,URL_B \\
        --key sk-team-a-1 check                  # keyed chat 200, 401s, pins 403, both servers routed
    sglang-fair lab fleet-probe ... chats --count 4        # 4 chats at once through the gateway, all 200
    sglang-fair lab fleet-probe ... out --server NAME      # until /gateway/state lists NAME taken out
    sglang-fair lab fleet-probe ... back --server NAME     # until it is back and chats are routed to it
    sglang-fair lab fleet-probe ... peers --count 1        # until a peer replica is heard both ways and
                                                              # 1 of its dispatches was recorded here

``--servers`` are the servers' published URLs (for the direct requests); ``--server NAME`` matches the
gateway's own URL of a server (``http://NAME:30000``). Standard library only (``docker_probe``'s request
helper). Prints one line per check; the first that fails ends the run with exit code 1 and names it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sglang_fair.lab.docker_probe import CHAT, ProbeConfig, ProbeFailed, request, run_checks

STATE = "/gateway/state"


@dataclass(frozen=True)
class Fleet:
    """The gateway, the servers' published URLs and a client's key."""

    gateway: ProbeConfig
    servers: tuple[str, ...]
    key: str
    wait: float = 120.0  # out/back: how long the gateway may take (health probes every --health-interval)


def chat(fleet: Fleet, text: str, key: str | None = None) -> tuple[int, str]:
    """A chat through the gateway with ``key`` (default: the fleet's) and its own prompt ``text``."""
    cfg = fleet.gateway
    body = {"model": "default", "max_tokens": 4, "messages": [{"role": "user", "content": text}]}
    return post(cfg, CHAT, body, {"Authorization": f"Bearer {key or fleet.key}"})


def post(cfg: ProbeConfig, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, str]:
    """(status, text) of a JSON POST to ``cfg.base_url + path``; error statuses are returned."""
    req = urllib.request.Request(cfg.base_url.rstrip("/") + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=cfg.timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except OSError as err:
        raise ProbeFailed(f"{path}: no answer ({err})") from None


def state(fleet: Fleet) -> dict[str, Any]:
    status, text = request(fleet.gateway, STATE)
    if status != 200:
        raise ProbeFailed(f"{STATE}: status {status}: {text[:300]}")
    answer: dict[str, Any] = json.loads(text)
    return answer


def routed(snapshot: dict[str, Any]) -> dict[str, int]:
    """Requests routed per server URL (the gateway's)."""
    out: dict[str, int] = {}
    for worker in snapshot.get("workers", []):
        out[worker["server"]] = out.get(worker["server"], 0) + int(worker["routed"])
    return out


def check_chat(fleet: Fleet) -> str:
    status, text = chat(fleet, "the fair cache")
    if status != 200 or not (json.loads(text).get("choices") or [{}])[0].get("message"):
        raise ProbeFailed(f"status {status}, expected 200 with a completion: {text[:300]}")
    return "200 with a completion"


def check_wrong_key(fleet: Fleet) -> str:
    status, text = chat(fleet, "the fair cache", key="sk-not-a-key")
    if status != 401:
        raise ProbeFailed(f"status {status}, expected 401: {text[:300]}")
    return "401"


def check_pins(fleet: Fleet) -> str:
    body = {"model": "default", "max_tokens": 1, "routed_dp_rank": 0,
            "messages": [{"role": "user", "content": "x"}]}
    for url in fleet.servers:
        status, text = post(ProbeConfig(url, "-"), CHAT, body, {"Authorization": f"Bearer {fleet.key}"})
        if status != 403 or "gateway" not in text:
            raise ProbeFailed(f"{url}: status {status}, expected 403 naming the gateway: {text[:300]}")
    return f"403 at each of {len(fleet.servers)} servers (a key but no gateway token)"


def burst(fleet: Fleet, label: str, count: int) -> None:
    """``count`` chats at once through the gateway, each with its own prompt; all must answer 200. At once,
    so that the policy balances them by queue and not only by a prefix they share (the chat template)."""
    texts = [f"{label} {i} " + hashlib.sha256(f"{label}{i}".encode()).hexdigest() for i in range(count)]
    with ThreadPoolExecutor(count) as pool:
        answers = list(pool.map(lambda text: chat(fleet, text), texts))
    failed = [(status, body[:200]) for status, body in answers if status != 200]
    if failed:
        raise ProbeFailed(f"{len(failed)} of {count} chats not 200: {failed[0]}")


def check_both_routed(fleet: Fleet, rounds: int = 4) -> str:
    """Bursts of chats until the gateway has routed at least one to every server it lists."""
    for i in range(rounds + 1):
        snapshot = state(fleet)
        counts = routed(snapshot)
        if len(counts) == len(fleet.servers) and min(counts.values()) >= 1:
            return f"{len(snapshot['workers'])} workers of {len(counts)} servers, routed {counts}"
        if i < rounds:
            burst(fleet, f"spread {i}", 4)
    raise ProbeFailed(f"after {rounds} bursts of 4 chats: servers {sorted(counts)} routed {counts}")


def check_feedback(fleet: Fleet) -> str:
    """Every worker's heartbeats reach the gateway over its servers' feedback ports."""
    heard = state(fleet).get("feedback") or {}
    workers = heard.get("workers") or {}
    stale = {w: b["heartbeat_age_s"] for w, b in workers.items() if b["heartbeat_age_s"] > 5}
    if not workers or stale or not heard.get("heartbeats"):
        raise ProbeFailed(f"feedback: {heard} (no heartbeats, or workers silent over 5 s: {stale})")
    evictions = heard.get("evictions", 0)
    return f"{heard['heartbeats']} heartbeats from {len(workers)} workers, {evictions} evictions"


def check_chats(fleet: Fleet, count: int) -> str:
    burst(fleet, "failover", count)
    return f"{count} of {count} chats 200"


def server_url(snapshot: dict[str, Any], name: str) -> str:
    urls = sorted({w["server"] for w in snapshot.get("workers", [])})
    found = [u for u in urls if f"//{name}:" in u]
    if len(found) != 1:
        raise ProbeFailed(f"no one server named {name!r} among {urls}")
    return str(found[0])


def check_out(fleet: Fleet, name: str) -> str:
    start = time.monotonic()
    while True:
        snapshot = state(fleet)
        url = server_url(snapshot, name)
        if url in snapshot.get("servers_out", {}):
            return f"{url} out after {time.monotonic() - start:.0f} s: {snapshot['servers_out'][url]}"
        if time.monotonic() - start > fleet.wait:
            raise ProbeFailed(f"{url} still in after {fleet.wait:.0f} s: {snapshot.get('servers_out')}")
        time.sleep(1)


def check_back(fleet: Fleet, name: str) -> str:
    """Until the server is no longer out, then chats until one is routed to it."""
    start = time.monotonic()
    while True:
        snapshot = state(fleet)
        url = server_url(snapshot, name)
        if url not in snapshot.get("servers_out", {}):
            break
        if time.monotonic() - start > fleet.wait:
            raise ProbeFailed(f"{url} still out after {fleet.wait:.0f} s: {snapshot['servers_out'][url]}")
        time.sleep(1)
    back = time.monotonic() - start
    before = routed(snapshot).get(url, 0)
    for i in range(4):
        burst(fleet, f"back {i}", 4)
        if routed(state(fleet)).get(url, 0) > before:
            return f"{url} back after {back:.0f} s; routed to again in burst {i + 1} of 4 chats"
    raise ProbeFailed(f"{url} back, but none of 4 bursts of 4 chats after it was routed there")


def check_peers(fleet: Fleet, observed: int) -> str:
    """The gateway hears a peer replica that hears it and numbers the workers alike, and has recorded at
    least ``observed`` of its peers' dispatches."""
    start = time.monotonic()
    while True:
        snapshot = state(fleet)
        peers = snapshot.get("peers") or {}
        runs = (peers.get("runs") or {}).values()
        mutual = [r["name"] for r in runs if r["hears_me"] and r["same_workers"]]
        seen = int(snapshot.get("observed_from_peers", 0))
        if mutual and seen >= observed:
            return f"hears {', '.join(mutual)} (which hears it); {seen} of the peers' dispatches recorded"
        if time.monotonic() - start > fleet.wait:
            raise ProbeFailed(f"no peer heard both ways, or fewer than {observed} dispatches recorded: "
                              f"{peers}")
        time.sleep(1)


def checks(fleet: Fleet, args: argparse.Namespace) -> list[tuple[str, Callable[[], str]]]:
    if args.action == "check":
        return [("chat through the gateway with the key", lambda: check_chat(fleet)),
                ("chat through the gateway with a wrong key", lambda: check_wrong_key(fleet)),
                ("a pinned routed_dp_rank straight to each server", lambda: check_pins(fleet)),
                ("/gateway/state: both servers' workers, requests routed to each",
                 lambda: check_both_routed(fleet)),
                ("/gateway/state: every worker's heartbeats over the feedback ports",
                 lambda: check_feedback(fleet))]
    if args.action == "chats":
        return [("chats through the gateway", lambda: check_chats(fleet, args.count))]
    if args.action == "peers":
        return [("/gateway/state: a peer replica heard both ways", lambda: check_peers(fleet, args.count))]
    if args.action == "out":
        return [(f"the gateway takes {args.server} out", lambda: check_out(fleet, args.server))]
    return [(f"the gateway takes {args.server} back", lambda: check_back(fleet, args.server))]


def run(fleet: Fleet, args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    """Run the action's checks in order; 0 if all pass, 1 at the first failure (named in the output)."""
    return run_checks(checks(fleet, args), out)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gateway", required=True, help="the gateway's base URL")
    parser.add_argument("--servers", required=True, help="comma-separated published URLs of the servers")
    parser.add_argument("--key", required=True, help="an API key of the keys file")
    parser.add_argument("--wait", type=float, default=120.0, help="out/back: seconds to wait")
    parser.add_argument("action", choices=["check", "chats", "out", "back", "peers"])
    parser.add_argument("--count", type=int, default=4,
                        help="chats: how many; peers: dispatches of the peers the gateway must have recorded")
    parser.add_argument("--server", help="out/back: the server's service name")
    args = parser.parse_args(argv)
    if args.action in ("out", "back") and not args.server:
        parser.error(f"{args.action} needs --server")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    servers = tuple(u for u in args.servers.split(",") if u)
    return run(Fleet(ProbeConfig(args.gateway, "-"), servers, args.key, args.wait), args)


if __name__ == "__main__":
    sys.exit(main())
