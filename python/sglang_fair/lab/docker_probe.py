"""Check a running sglang-fair server as a user of the compose `cpu` profile would (scripts/docker_check.sh).

    sglang-fair lab docker-probe --base-url http://127.0.0.1:30000 --client team-a \\
        --key sk-team-a-1 --other-key sk-team-b-1          # with a keys file and --fairness-admins team-a
    sglang-fair lab docker-probe --base-url http://127.0.0.1:30000 --client alice   # without keys

With keys, in order: an OpenAI chat request with the key gets 200 and a completion; a wrong key and no key
get 401; ``/fairness`` with the key lists its client with the request counted, and without a key gets 401;
``/metrics`` with the key carries every ``sglang_fair:*`` gauge for that client, and with the key of a
client that is not an admin gets 403. Without keys (docs/guides/deploy.md, "Try it on CPU"): a chat request
that names its client in ``X-Client-Id`` gets 200, and ``/fairness`` and ``/metrics`` show that client.
Standard library only, so any python3 on the host runs it. Prints one line per check; the first that
fails ends the run with exit code 1 and names the check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

# sglang_fair.sglang_plugin.client_gauges.FIGURES (tests/deploy checks that the two agree)
GAUGES = ("counter", "service", "perceived_service", "waiting", "running",
          "input_tokens", "cached_tokens", "output_tokens")
CHAT = "/v1/chat/completions"


class ProbeFailed(Exception):
    """A check did not see what a user should see; the message says what it saw."""


@dataclass(frozen=True)
class ProbeConfig:
    """Where the server is and who asks: with ``key`` (an admin client's) the keyed checks, else the
    client names itself in the ``X-Client-Id`` header."""

    base_url: str
    client: str
    key: str | None = None
    other_key: str | None = None  # a key of a client that is not an admin
    wrong_key: str = "sk-not-a-key"
    timeout: float = 120.0  # one chat completion on a loaded 2-core machine
    settle: float = 10.0  # how long /fairness may lag the finished request (published every 0.1 s)


def request(cfg: ProbeConfig, path: str, key: str | None = None, named: bool = False) -> tuple[int, str]:
    """(HTTP status, body text) of a GET, or of a chat POST for ``CHAT``; error statuses are returned."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if named:
        headers["X-Client-Id"] = cfg.client
    body = {"model": "default", "max_tokens": 8, "messages": [{"role": "user", "content": "the fair cache"}]}
    data = json.dumps(body).encode() if path == CHAT else None
    req = urllib.request.Request(cfg.base_url.rstrip("/") + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=cfg.timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as err:
        raise ProbeFailed(f"{path}: no answer ({err})") from None


def check_chat(cfg: ProbeConfig) -> str:
    status, text = request(cfg, CHAT, key=cfg.key, named=cfg.key is None)
    if status != 200:
        raise ProbeFailed(f"status {status}, expected 200: {text[:300]}")
    choices = json.loads(text).get("choices") or []
    if not choices or "message" not in choices[0]:
        raise ProbeFailed(f"no completion in the answer: {text[:300]}")
    return "200 with a completion"


def check_status(cfg: ProbeConfig, path: str, key: str | None, expected: int) -> str:
    status, text = request(cfg, path, key=key)
    if status != expected:
        raise ProbeFailed(f"status {status}, expected {expected}: {text[:300]}")
    return str(status)


def check_fairness(cfg: ProbeConfig) -> str:
    deadline = time.monotonic() + cfg.settle
    while True:
        status, text = request(cfg, "/fairness", key=cfg.key)
        if status != 200:
            raise ProbeFailed(f"status {status}: {text[:300]}")
        clients = json.loads(text).get("clients", {})
        row = clients.get(cfg.client)
        if row and row.get("requests", 0) >= 1:
            return f"client {cfg.client!r}: {row['requests']} request(s), service {row.get('service')}"
        if time.monotonic() > deadline:
            raise ProbeFailed(f"client {cfg.client!r} not listed with a request: clients {sorted(clients)}")
        time.sleep(0.5)


def check_metrics(cfg: ProbeConfig) -> str:
    status, text = request(cfg, "/metrics", key=cfg.key)
    if status != 200:
        raise ProbeFailed(f"status {status}: {text[:300]}")
    label = f'client="{cfg.client}"'
    missing = [g for g in GAUGES if not any(
        line.startswith(f"sglang_fair:{g}{{") and label in line for line in text.splitlines())]
    if missing:
        raise ProbeFailed(f"no sglang_fair:* series with {label} for {missing}")
    return f"{len(GAUGES)} sglang_fair:* gauges for {label}"


def checks(cfg: ProbeConfig) -> list[tuple[str, Callable[[], str]]]:
    """The checks in the order they run (names as the output prints them)."""
    if cfg.key is None:
        return [
            ("chat naming its client in X-Client-Id", lambda: check_chat(cfg)),
            ("/fairness shows the client", lambda: check_fairness(cfg)),
            ("/metrics has the sglang_fair gauges", lambda: check_metrics(cfg)),
        ]
    return [
        ("chat with the key", lambda: check_chat(cfg)),
        ("chat with a wrong key", lambda: check_status(cfg, CHAT, cfg.wrong_key, 401)),
        ("chat without a key", lambda: check_status(cfg, CHAT, None, 401)),
        ("/fairness shows the key's client", lambda: check_fairness(cfg)),
        ("/fairness without a key", lambda: check_status(cfg, "/fairness", None, 401)),
        ("/metrics has the sglang_fair gauges", lambda: check_metrics(cfg)),
        ("/metrics with a key that is not an admin's",
         lambda: check_status(cfg, "/metrics", cfg.other_key, 403)),
    ]


def run(cfg: ProbeConfig, out: Callable[[str], None] = print) -> int:
    """Run the checks in order; 0 if all pass, 1 at the first failure (named in the output)."""
    return run_checks(checks(cfg), out)


def run_checks(named: list[tuple[str, Callable[[], str]]], out: Callable[[str], None] = print) -> int:
    """Run ``(name, check)`` pairs in order, one line each; 0 if all pass, 1 at the first failure."""
    for name, check in named:
        try:
            detail = check()
        except ProbeFailed as err:
            out(f"FAILED {name}: {err}")
            return 1
        out(f"ok {name}: {detail}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--client", required=True, help="the client of --key, or the X-Client-Id to send")
    parser.add_argument("--key", help="an API key of a --fairness-admins client (the server has a keys file)")
    parser.add_argument("--other-key", help="with --key: an API key of a client that is not an admin")
    args = parser.parse_args(argv)
    if (args.key is None) != (args.other_key is None):
        parser.error("--key and --other-key go together")
    return run(ProbeConfig(args.base_url, args.client, args.key, args.other_key))


if __name__ == "__main__":
    sys.exit(main())
