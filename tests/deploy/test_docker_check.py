"""The parts of scripts/docker_check.sh that run without a Docker engine: its probe (``lab docker-probe``)
against a stand-in server that behaves (passes) and against servers that each get one thing wrong (the
probe must fail and name that check); the probe's gauge list against the plugin's; the SGLang stand-in
image's pins against scripts/install_sglang_cpu.sh. The compose override is checked with the compose file
(test_compose.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from deploy_support import ROOT
from stand_in import StandIn, stand_ins

from sglang_fair.lab import docker_probe as probe
from sglang_fair.sglang_plugin.client_gauges import FIGURES

KEYS = {"sk-a": "team-a", "sk-b": "team-b"}
ADMINS = {"team-a"}


class FakeServer(StandIn):
    """What the cpu profile answers, with a keys file and --fairness-admins (``keyed``) or without (clients
    name themselves in X-Client-Id); ``fault`` breaks one thing."""

    fault = ""
    keyed = True
    requests: ClassVar[dict[str, int]] = {}  # per server: start() gives each handler class its own

    def client(self) -> str | None:
        if not self.keyed:
            named = self.headers.get("X-Client-Id", "")
            return "default" if self.fault == "header ignored" or not named else named
        auth = self.headers.get("Authorization", "")
        key = auth[7:] if auth.startswith("Bearer ") else None
        if self.fault == "any key" and key:
            return KEYS.get(key, "stranger")
        return KEYS.get(key or "")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        client = self.client()
        open_chat = self.fault == "open chat" and "Authorization" not in self.headers
        if client is None and not open_chat:
            return self.answer(401, json.dumps({"message": "missing API key"}))
        if self.fault == "chat 500":
            return self.answer(500, "{}")
        name = client or "default"
        self.requests[name] = self.requests.get(name, 0) + 1
        self.answer(200, json.dumps({"choices": [{"message": {"role": "assistant", "content": "x"}}]}))

    def do_GET(self) -> None:
        client = self.client()
        if self.path == "/fairness":
            if client is None and self.fault != "open fairness":
                return self.answer(401, "{}")
            rows = {} if self.fault == "fairness empty" else {
                c: {"requests": n, "service": 1.0} for c, n in self.requests.items()
                if c == client or client is None or not self.keyed}
            return self.answer(200, json.dumps({"policy": "dlpm_light", "clients": rows}))
        if self.path == "/metrics":
            if client is None:
                return self.answer(401, "{}")
            if self.keyed and client not in ADMINS and self.fault != "metrics for all":
                return self.answer(403, "{}")
            gauges = [g for g in FIGURES if not (self.fault == "no cached_tokens" and g == "cached_tokens")]
            text = "".join(f'sglang_fair:{g}{{client="{c}",dp_rank="0"}} 1.0\n'
                           for g in gauges for c in self.requests)
            return self.answer(200, text, "text/plain")
        self.answer(404, "{}")


@pytest.fixture
def serve() -> Iterator[Any]:
    with stand_ins() as start:
        yield lambda fault, keyed=True: start(type("Handler", (FakeServer,),
                                                   {"fault": fault, "keyed": keyed, "requests": {}}))


def run_probe(url: str, keyed: bool = True) -> tuple[int, list[str]]:
    lines: list[str] = []
    keys = ("sk-a", "sk-b") if keyed else (None, None)
    cfg = probe.ProbeConfig(url, "team-a", *keys, timeout=10.0, settle=1.0)
    return probe.run(cfg, lines.append), lines


@pytest.mark.parametrize("keyed", [True, False], ids=["keys", "header"])
def test_probe_passes_a_server_that_behaves(serve: Any, keyed: bool) -> None:
    code, lines = run_probe(serve("", keyed), keyed)
    assert code == 0, lines
    expected = 7 if keyed else 3
    assert len(lines) == expected and all(line.startswith("ok ") for line in lines), lines


@pytest.mark.parametrize(("fault", "failing"), [
    ("chat 500", "chat with the key"),
    ("any key", "chat with a wrong key"),
    ("open chat", "chat without a key"),
    ("fairness empty", "/fairness shows the key's client"),
    ("open fairness", "/fairness without a key"),
    ("no cached_tokens", "/metrics has the sglang_fair gauges"),
    ("metrics for all", "/metrics with a key that is not an admin's"),
])
def test_probe_names_what_a_server_gets_wrong(serve: Any, fault: str, failing: str) -> None:
    code, lines = run_probe(serve(fault))
    assert code == 1
    assert lines[-1].startswith(f"FAILED {failing}:"), lines


def test_probe_names_a_server_that_ignores_the_client_header(serve: Any) -> None:
    code, lines = run_probe(serve("header ignored", keyed=False), keyed=False)
    assert code == 1 and lines[-1].startswith("FAILED /fairness shows the client:"), lines


def test_probe_without_a_server_fails_at_the_first_check() -> None:
    code, lines = run_probe("http://127.0.0.1:9")  # discard port: nothing listens
    assert code == 1 and lines == [lines[0]] and "no answer" in lines[0], lines


def test_probe_gauges_are_the_plugins() -> None:
    assert tuple(probe.GAUGES) == tuple(FIGURES)


def pins(text: str) -> dict[str, str]:
    return {name.lower().replace("_", "-"): version
            for name, version in re.findall(r"([A-Za-z][\w.-]*)==([\w.+]+)", text)}


def test_sglang_stand_in_pins_are_the_cpu_installs() -> None:
    """The stand-in for SGLang's image installs SGLang's package and the dependencies sglang-fair takes
    from that image at the versions the CPU install verified together."""
    stand_in = pins((ROOT / "docker" / "local" / "sglang.Dockerfile").read_text())
    installed = pins((ROOT / "scripts" / "install_sglang_cpu.sh").read_text())
    assert {"sglang", "pyzmq", "msgspec", "prometheus-client", "aiohttp"} <= set(stand_in)
    assert {k: installed.get(k) for k in stand_in} == stand_in


def test_the_check_is_named_where_users_look() -> None:
    for doc in ("README.md", "docs/guides/deploy.md"):
        assert "scripts/docker_check.sh" in (ROOT / doc).read_text(), doc
