"""``/metrics`` of ``gateway --workers N`` merged over the processes (``gateway/metrics_sum.py``), on
hand-built texts: per-process counters summed, whole-gateway figures taken once (max), per-process facts
labelled by process. Negative controls: the first process alone (what the shared port answered before)
and a naive sum of everything each fail the same assertions. The end-to-end check against a real
``--workers 2`` is in ``test_workers.py``."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from sglang_fair.gateway.metrics_sum import ANSWERED, RULES, merge, over_unix_socket, rule, whole

W = 'worker="http://s:1 rank 0",server="http://s:1",rank="0"'
P0 = f"""# TYPE sglang_fair_gateway_client_answers_total counter
sglang_fair_gateway_client_answers_total{{client="a",kind="requests"}} 3.0
# TYPE sglang_fair_gateway_worker_routed_total counter
sglang_fair_gateway_worker_routed_total{{{W}}} 2.0
# TYPE sglang_fair_gateway_worker_finished_total counter
sglang_fair_gateway_worker_finished_total{{{W}}} 5.0
# TYPE sglang_fair_gateway_worker_queue gauge
sglang_fair_gateway_worker_queue{{{W}}} 1.0
# TYPE sglang_fair_gateway_processes gauge
sglang_fair_gateway_processes 2.0
# TYPE sglang_fair_gateway_process_restarts_total counter
sglang_fair_gateway_process_restarts_total 1.0
# TYPE sglang_fair_gateway_process_index gauge
sglang_fair_gateway_process_index 0.0
# TYPE sglang_fair_gateway_duty_running gauge
sglang_fair_gateway_duty_running{{duty="health"}} 1.0
# TYPE sglang_fair_tenant_service gauge
sglang_fair_tenant_service{{tenant="a"}} 10.0
# TYPE sglang_fair_tenant_in_flight gauge
sglang_fair_tenant_in_flight{{tenant="a"}} 1.0
# TYPE some_new_total counter
some_new_total 2.0
# TYPE some_new_gauge gauge
some_new_gauge 7.0
"""
P1 = (P0.replace('kind="requests"} 3.0', 'kind="requests"} 4.0\n'
                 'sglang_fair_gateway_client_answers_total{client="b",kind="requests"} 1.0')
      .replace("_routed_total{" + W + "} 2.0", "_routed_total{" + W + "} 3.0")
      .replace("process_index 0.0", "process_index 1.0").replace('duty="health"} 1.0', 'duty="health"} 0.0')
      .replace('in_flight{tenant="a"} 1.0', 'in_flight{tenant="a"} 2.0'))


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            for s in family.samples}


def value(found: dict[Any, float], name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def check_whole(text: str) -> None:
    """The assertions a merged ``/metrics`` of P0 and P1 must pass."""
    found = samples(text)
    assert value(found, "sglang_fair_gateway_client_answers_total", client="a", kind="requests") == 7.0
    assert value(found, "sglang_fair_gateway_client_answers_total", client="b", kind="requests") == 1.0
    routed = [v for (n, _), v in found.items() if n == "sglang_fair_gateway_worker_routed_total"]
    assert routed == [5.0]
    finished = [v for (n, _), v in found.items() if n == "sglang_fair_gateway_worker_finished_total"]
    assert finished == [5.0]  # every process counts every finish already: not 10
    assert value(found, "sglang_fair_gateway_process_restarts_total") == 1.0  # the parent's: not 2
    assert value(found, "sglang_fair_gateway_processes") == 2.0
    assert value(found, "sglang_fair_tenant_service", tenant="a") == 10.0  # the servers': not 20
    assert value(found, "sglang_fair_tenant_in_flight", tenant="a") == 3.0
    assert value(found, "sglang_fair_gateway_duty_running", duty="health", process="0") == 1.0
    assert value(found, "sglang_fair_gateway_duty_running", duty="health", process="1") == 0.0
    assert value(found, "some_new_total") == 4.0  # an unlisted counter: summed
    assert value(found, "some_new_gauge", process="1") == 7.0  # an unlisted gauge: per process
    assert value(found, ANSWERED) == 2.0


def test_the_merge_sums_counters_takes_shared_figures_once_and_labels_per_process_facts() -> None:
    text = merge({0: P0, 1: P1}, own=1).decode()
    check_whole(text)
    assert value(samples(text), "sglang_fair_gateway_process_index") == 1.0  # the collecting process


def naive_sum(*texts: str) -> str:
    """Every sample summed by (name, labels), whatever it means."""
    total: dict[Any, float] = {}
    for text in texts:
        for key, v in samples(text).items():
            total[key] = total.get(key, 0.0) + v
    lines = [name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels)) + "} " + str(v)
             for (name, labels), v in total.items()]
    return "\n".join(lines) + f"\n{ANSWERED} 2.0\n"


def test_negative_controls_the_first_process_alone_and_a_naive_sum_fail() -> None:
    with pytest.raises(AssertionError):
        check_whole(P0)  # what the shared port answered before: whichever process got the scrape
    with pytest.raises(AssertionError, match=r"10\.0"):
        check_whole(naive_sum(P0, P1))  # every finish counted twice


def test_every_family_the_gateway_exports_has_a_rule() -> None:
    """A new family must be decided on: the names in the metric builders are all in RULES."""
    import re
    from pathlib import Path

    python = Path(__file__).resolve().parents[2] / "python" / "sglang_fair"
    sources = [python / "dashboard" / "gateway_metrics.py", python / "gateway" / "duties.py",
               python / "gateway" / "processes.py"]
    names = {m for path in sources for m in re.findall(r'"(sglang_fair_gateway_[a-z_]+)"', path.read_text())}
    names |= {"sglang_fair_gateway_" + m for path in sources[:1]
              for m in re.findall(r'PREFIX \+ f?"([a-z_]+)"', path.read_text())}
    names = {n for n in names if not n.endswith("_")}
    assert "sglang_fair_gateway_client_answers" in names and len(names) >= 10, names
    assert names <= set(RULES), names - set(RULES)
    assert rule("x", "counter") == "sum" and rule("x", "gauge") == "process"


def test_over_unix_socket_is_read_from_uvicorns_server_address() -> None:
    assert over_unix_socket({"server": ("/tmp/d/http-0.sock", None)})
    assert not over_unix_socket({"server": ("127.0.0.1", 8080)})
    assert not over_unix_socket({})


async def sibling(path: str, text: str, heard: list[dict[str, str]]) -> web.AppRunner:
    async def metrics(request: web.Request) -> web.Response:
        heard.append({k.lower(): v for k, v in request.headers.items()})
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, path).start()
    return runner


@pytest.mark.timers
def test_whole_reads_the_siblings_forwards_only_the_key_and_leaves_out_the_silent(tmp_path: Any) -> None:
    """Process 0 of 3: process 1 answers on its socket, process 2's socket accepts and never answers
    (left out after the timeout, counted in ``processes_answered``); only the caller's key goes on."""
    heard: list[dict[str, str]] = []
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(os.path.join(tmp_path, "http-2.sock"))
    silent.listen(8)

    async def scenario() -> bytes:
        runner = await sibling(os.path.join(tmp_path, "http-1.sock"), P1, heard)
        try:
            headers = {"authorization": "Bearer admin-key", "cookie": "c", "x-client-id": "me"}
            return await whole(P0.encode(), 0, os.path.join(tmp_path, "http-0.sock"), 3, headers, 0.3)
        finally:
            await runner.cleanup()

    try:
        text = asyncio.run(scenario()).decode()
    finally:
        silent.close()
    found = samples(text)
    assert value(found, ANSWERED) == 2.0
    assert value(found, "sglang_fair_gateway_client_answers_total", client="a", kind="requests") == 7.0
    assert heard and heard[0].get("authorization") == "Bearer admin-key"
    assert "cookie" not in heard[0] and "x-client-id" not in heard[0]
