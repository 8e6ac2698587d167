"""The server's own requests are not clients: SGLang's ``/health`` probe (a one-token request) and its
start-up warm-up are scheduled, but ``/fairness`` and the Prometheus gauges list them apart
(``internal``), so 4 probes no longer show as 5 requests of a client ``default``."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_edge_holes import WITH_KEYS, call, middleware

from sglang_fair.edge.identity import INTERNAL_CLIENTS, PROBE_CLIENT, WARMUP_CLIENT
from sglang_fair.sglang_plugin import http_hooks
from sglang_fair.sglang_plugin.config import FairConfig
from sglang_fair.sglang_plugin.publish import Publisher, read_all


def write(tmp_path: Path, rank: int, clients: dict[str, dict[str, float]]) -> None:
    (tmp_path / f"scheduler-{rank}.json").write_text(json.dumps({"policy": "dlpm_light", "clients": clients}))


def test_probes_and_the_warmup_are_listed_apart_from_the_clients(tmp_path: Path) -> None:
    write(tmp_path, 0, {"alice": {"requests": 1.0}, PROBE_CLIENT: {"requests": 4.0},
                        WARMUP_CLIENT: {"requests": 1.0}})
    write(tmp_path, 1, {PROBE_CLIENT: {"requests": 2.0}})
    merged = read_all(tmp_path)
    assert set(merged["clients"]) == {"alice"}
    assert merged["internal"] == {PROBE_CLIENT: {"requests": 6.0, "counter": None, "counters": [None, None]},
                                  WARMUP_CLIENT: {"requests": 1.0, "counter": None, "counters": [None, None]}}
    assert read_all(None)["internal"] == {}


def test_the_gauges_leave_the_servers_own_requests_out(tmp_path: Path) -> None:
    pub = Publisher(tmp_path / "scheduler-0.json", "dlpm_light")
    seen: list[dict[str, Any]] = []
    pub.gauges = SimpleNamespace(update=seen.append)
    pub.maybe_write(1, idle=True, snapshot=lambda: {"bob": {"service": 1.0}, PROBE_CLIENT: {"service": 1.0}})
    assert seen == [{"bob": {"service": 1.0}}]


@pytest.mark.parametrize("config", [FairConfig(), WITH_KEYS])
def test_the_warmup_is_not_the_client_default_with_or_without_keys(config: FairConfig) -> None:
    mw, seen = middleware(config, warmup=True)
    assert call(mw, "/generate", host="127.0.0.1") == [] and seen["client"] == WARMUP_CLIENT
    if not config.edge.key_table.enabled:  # a named client during the warm-up keeps its name
        assert call(mw, "/generate", {"X-Client-Id": "carol"}, host="127.0.0.1") == []
        assert seen["client"] == "carol"
        after, seen_after = middleware(config, warmup=False)
        assert call(after, "/generate", host="127.0.0.1") == [] and seen_after["client"] == "default"


@pytest.mark.sglang
def test_the_health_probe_is_the_probe_client_not_default() -> None:
    from sglang.srt.managers.io_struct import GenerateReqInput

    def original(self: Any, obj: Any, request: Any) -> str:
        return "sent"

    health = SimpleNamespace(scope={"path": "/health", "state": {}})  # an open path: no client resolved
    probe = GenerateReqInput(rid="HEALTH_CHECK_0f3a", input_ids=[0], sampling_params={"max_new_tokens": 1})
    http_hooks.generate_request(original, None, probe, health)
    assert probe.routing_key == PROBE_CLIENT in INTERNAL_CLIENTS
    mine = GenerateReqInput(rid="mine", text="a")
    named = SimpleNamespace(scope={"path": "/generate", "state": {"sglang_fair_client": "al"}})
    http_hooks.generate_request(original, None, mine, named)
    assert mine.routing_key == "al"
    posing = GenerateReqInput(rid="HEALTH_CHECK_mine", text="a")  # a client cannot pass for the probe
    http_hooks.generate_request(original, None, posing, named)
    assert posing.routing_key == "al"
