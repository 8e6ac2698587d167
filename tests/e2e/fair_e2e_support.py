"""Helpers shared by the end-to-end test modules."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from sglang_fair.harness.scenario import Summary, Workload, run_scenario
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
