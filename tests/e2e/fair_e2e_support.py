"""Helpers shared by the end-to-end test modules."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sglang_fair.harness.closed_loop import Outcome, generate
from sglang_fair.harness.scenario import Summary, Workload, run_scenario, words
from sglang_fair.harness.server import get_json, running_server

MAX_RUNNING = ("--max-running-requests", "8", "--max-total-tokens", "60000")
WINDOW_S = 20.0


def post(
    url: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """POST JSON; return (status, body) also for HTTP errors."""
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def wait_idle(url: str, timeout: float = 120.0, headers: dict[str, str] | None = None) -> None:
    """Wait until no client has a waiting or running request (the scenario's tail has drained)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        clients = get_json(url + "/fairness", headers=headers).get("clients", {})
        if all(c.get("waiting", 0) == 0 and c.get("running", 0) == 0 for c in clients.values()):
            return
        time.sleep(0.5)
    raise TimeoutError("server did not drain")


def requests_eventually(url: str, client: str, expected: int, timeout: float = 10.0,
                        headers: dict[str, str] | None = None) -> int:
    """``requests_of`` once it equals ``expected`` (or its last value after ``timeout``): the
    schedulers publish /fairness a few milliseconds after the response has reached the client."""
    deadline = time.monotonic() + timeout
    while True:
        got = requests_of(url, client, headers)
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def requests_of(url: str, client: str, headers: dict[str, str] | None = None) -> int:
    """Requests the scheduler admitted for ``client`` so far (from /fairness)."""
    clients = get_json(url + "/fairness", headers=headers).get("clients", {})
    return int((clients.get(client) or {}).get("requests", 0))


def run_policy(model: Path, log: Path, policy: str, extra: tuple[str, ...] = (), window: float = WINDOW_S,
               workload: Workload | None = None, seen: dict[str, Any] | None = None) -> Summary:
    """Start a server with ``policy`` (``""``: no --schedule-policy flag, the default), run the scenario,
    put the server's /fairness in ``seen``, stop the server."""
    args = (*(("--schedule-policy", policy) if policy else ()), *MAX_RUNNING, *extra)
    with running_server(model, args, log) as url:
        summary = run_scenario(url, workload or Workload(), window)
        if seen is not None:
            seen.update(get_json(url + "/fairness"))
        return summary


def children(server: Any, needle: str) -> list[Any]:
    """The processes under ``server`` (a Popen) whose command line contains ``needle``."""
    import psutil

    return [p for p in psutil.Process(server.pid).children(recursive=True) if needle in " ".join(p.cmdline())]


def load_in_threads(url: str, clients: list[str], seed: int, prompt_words: int, max_tokens: int,
                    headers: Callable[[str], dict[str, str]] | None = None
                    ) -> tuple[list[Outcome], list[threading.Thread]]:
    """One request per entry of ``clients``, each in its own thread, started now; a client is named
    in ``X-Client-Id`` unless ``headers(client)`` gives the headers."""
    outcomes = [Outcome(sent=0.0) for _ in clients]
    header_of = headers or (lambda client: {"X-Client-Id": client})

    def send(i: int) -> None:
        outcomes[i] = generate(url, header_of(clients[i]), words(seed + i, prompt_words), max_tokens,
                               timeout=120)

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(len(clients))]
    for t in threads:
        t.start()
    return outcomes, threads


def stopped_under_load(process: Any, threads: list[threading.Thread], hang_s: float = 30.0) -> float:
    """SIGSTOP ``process`` while ``threads`` send requests, wait for them all (none may still run
    ``hang_s`` after the stop), then SIGCONT; the time of the stop (``time.monotonic()``)."""
    stopped = time.monotonic()
    process.send_signal(signal.SIGSTOP)
    try:
        for t in threads:
            t.join(max(0.1, stopped + hang_s - time.monotonic()))
        assert not any(t.is_alive() for t in threads), "a request hung on the stopped process"
    finally:
        process.send_signal(signal.SIGCONT)
    return stopped
