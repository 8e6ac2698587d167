"""docker/compose.yaml without a docker engine: it parses, names only files that exist (the operator's
keys file and gateway token excepted: the keys' example must parse, a generated token stands in for the
token), and every service's command, after its ENTRYPOINT, is accepted by the real parsers: ``sglang-fair
serve``'s and ``gateway``'s own flags (validated as they validate them) and, for servers, SGLang's own
(SGLang's argparse parser with the plugin's policy names; that part needs the CPU SGLang install and
imports it, ~10 s). The fleet profiles put the gateway in front of servers that trust its token."""

from __future__ import annotations

import argparse
import json
import re
import secrets
from pathlib import Path
from typing import Any

import pytest
from deploy_support import DOCKER, ROOT, instructions

from sglang_fair.cli import build_parser
from sglang_fair.edge.keys import load_key_file
from sglang_fair.gateway.config import gateway_config
from sglang_fair.links.curve import make_keys
from sglang_fair.sglang_plugin.config import build_config
from sglang_fair.sglang_plugin.launcher import check_combination
from sglang_fair.sglang_plugin.router_launch import check_router_args, flag_value, plan_router
from sglang_fair.sglang_plugin.router_link import router_settings

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the CPU SGLang set)")
COMPOSE = DOCKER / "compose.yaml"
CHECK = DOCKER / "compose.check.yaml"  # scripts/docker_check.sh's additions to the cpu profile's build
KEY_FLAGS = ["--client-keys", "/etc/sglang-fair/keys.txt", "--fairness-admins", ""]
TOKEN_FLAGS = ["--gateway-token-file", "/etc/sglang-fair/gateway.token"]
FEEDBACK_KEYS = "/etc/sglang-fair/feedback"
FEEDBACK_FLAGS = ["--feedback-port", "30100", "--feedback-host", "0.0.0.0", "--feedback-keys", FEEDBACK_KEYS]
KEYS_EXAMPLE = DOCKER / "keys.example.txt"  # the operator makes ./keys.txt from it
TOKEN_TARGET = "/etc/sglang-fair/gateway.token"  # the operator makes ./gateway.token (openssl rand -hex 32)
FLEET_CPU_SERVERS = ("sglang-fair-cpu-a", "sglang-fair-cpu-b")
FLEET_CPU_GATEWAYS = ("sglang-fair-cpu-gateway", "sglang-fair-cpu-gateway-2")
GATEWAYS = ("gateway", "gateway-2")  # their key pairs, in the same order
OPS = ("sglang-fair-lb", "sglang-fair-cpu-lb", "prometheus", "grafana")  # test_compose_ops.py checks them
VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def interpolate(value: Any, missing: list[str]) -> Any:
    """Compose's ``${VAR:-default}`` with an empty environment (every variable needs a default)."""
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            if m.group(2) is None:
                missing.append(m.group(1))
            return m.group(2) or ""
        return VAR.sub(sub, value).replace("$$", "$")
    if isinstance(value, list):
        return [interpolate(v, missing) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, missing) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def operator_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files the operator creates, as bind-mount sources: the keys' example, a generated token,
    generated feedback keys."""
    operator = tmp_path_factory.mktemp("operator")
    token = operator / "gateway.token"
    token.write_text(secrets.token_hex(32) + "\n")
    make_keys(operator / "feedback-keys", GATEWAYS)  # sglang-fair keys DIR --gateway-names gateway,gateway-2
    return {"./keys.txt": KEYS_EXAMPLE, "./gateway.token": token,
            "./feedback-keys": operator / "feedback-keys"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    missing: list[str] = []
    doc = interpolate(yaml.safe_load(COMPOSE.read_text()), missing)
    assert missing == [], f"variables without a default: {missing}"
    return dict(doc)


def entrypoint(service: dict[str, Any]) -> list[str]:
    """The service's ``entrypoint``, else its image's ENTRYPOINT, after the program (``sglang-fair``)."""
    dockerfile = ROOT / service["build"]["dockerfile"]
    if "entrypoint" in service:
        program, *argv = service["entrypoint"]
    else:
        (args,) = [rest for word, rest in instructions(dockerfile.read_text()) if word == "ENTRYPOINT"]
        program, *argv = json.loads(args)
    assert program == "sglang-fair", dockerfile
    return list(argv)


def host_argv(service: dict[str, Any], files: dict[str, Path]) -> list[str]:
    """ENTRYPOINT + command with each file argument that lives on a bind mount replaced by the host
    file (the operator's files by ``files``), so flags that read files are validated too."""
    mounts = {v["target"]: v["source"] for v in service.get("volumes", []) if isinstance(v, dict)}
    argv = entrypoint(service) + service["command"]
    for i, arg in enumerate(argv):
        if arg in mounts:
            source = mounts[arg]
            argv[i] = str(files.get(source, DOCKER / source))
        else:
            assert not arg.startswith("/etc/"), f"{arg} is not mounted"
    return argv


def fair(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run ``sglang-fair`` (servers and gateways; the load balancer and monitoring are
    checked in test_compose_ops.py)."""
    return {n: s for n, s in compose["services"].items() if n not in OPS}


def servers(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run ``sglang-fair serve`` (the image's ENTRYPOINT), not the gateway."""
    return {n: s for n, s in fair(compose).items() if entrypoint(s)[0] == "serve"}


def test_profiles_and_files(compose: dict[str, Any]) -> None:
    services = fair(compose)
    assert {p for s in compose["services"].values() for p in s["profiles"]} == {
        "gpu", "dp", "cpu", "fleet", "fleet-cpu", "monitoring"}
    for name, service in services.items():
        assert (DOCKER / service["build"]["context"]).resolve() == ROOT, name
        assert (ROOT / service["build"]["dockerfile"]).is_file(), name
        assert service["restart"] == "unless-stopped" and "healthcheck" in service, name
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith((".", "/")):
                if source == "./keys.txt":
                    assert load_key_file(str(KEYS_EXAMPLE)).enabled
                elif source == "./gateway.token":
                    assert volume["target"] == TOKEN_TARGET and volume["read_only"], name
                elif source == "./feedback-keys":
                    assert volume["target"] == FEEDBACK_KEYS and volume["read_only"], name
                else:
                    assert (DOCKER / source).exists(), f"{name}: {source}"
            else:
                assert source in compose["volumes"], f"{name}: undeclared volume {source}"
    doc = "".join((ROOT / "docs" / "guides" / d).read_text() for d in ("deploy.md", "fleet.md"))
    for made in ("docker/keys.txt", "docker/gateway.token", "sglang-fair keys docker/feedback-keys"):
        assert made in doc, made  # the doc says to create them


def test_ports_match_the_commands(compose: dict[str, Any]) -> None:
    for name, service in fair(compose).items():
        argv = entrypoint(service) + service["command"]
        inside = {int(p.rsplit(":", 1)[1]) for p in service["ports"]}
        expected = {int(flag_value(argv, "--port") or 0)}
        router_port = flag_value(argv, "--router-http-port")
        if router_port:
            expected.add(int(router_port))
            assert flag_value(argv, "--router-http-host") == "0.0.0.0", name  # reachable through the port
        health = " ".join(service["healthcheck"]["test"])
        assert all(str(p) in health for p in expected), name
        for across in ("--feedback-port", "--peer-port"):  # across nodes: published (fleet-cpu: one network)
            if flag_value(argv, across) and "fleet" in service["profiles"]:
                expected.add(int(flag_value(argv, across) or 0))
        assert inside == expected, name
        assert service["labels"]["prometheus.io/port"] == flag_value(argv, "--port"), name  # its /metrics


def test_project_flags_parse_and_validate(compose: dict[str, Any], operator_files: dict[str, Path]) -> None:
    parser = build_parser()
    for name, service in fair(compose).items():
        if name not in servers(compose):
            args = parser.parse_args(host_argv(service, operator_files))
            assert args.command == "gateway", name
            config = gateway_config(args)  # the gateway's own validation; reads the keys and token files
            assert config.edge.key_table.enabled and config.edge.gateway_token.enabled, name
            continue
        args, extra = parser.parse_known_args(host_argv(service, operator_files))
        assert args.command == "serve", name
        values = {k: getattr(args, k) for k in vars(args) if k not in ("func", "command", "pass_through")}
        config = build_config(values)  # serve's own validation: raises ConfigError on a bad value
        router_settings(args)
        if name == "sglang-fair-dp":
            assert plan_router(extra).policy == "fair_cache_aware"
            assert config.edge.key_table.enabled


def check_with_sglang(name: str, service: dict[str, Any], sglang_parser: argparse.ArgumentParser,
                      files: dict[str, Path]) -> None:
    args, extra = build_parser().parse_known_args(host_argv(service, files))
    plan = plan_router(extra)
    try:
        server_args = sglang_parser.parse_args(plan.sglang_args)
    except (argparse.ArgumentError, SystemExit) as err:
        raise AssertionError(f"{name}: SGLang rejects {plan.sglang_args}: {err}") from err
    values = {k: getattr(args, k) for k in vars(args) if k not in ("func", "command", "pass_through")}
    check_combination(build_config(values), server_args)  # the launcher's checks after SGLang's parse
    assert check_router_args(plan, server_args).policy == plan.policy, name


@pytest.mark.sglang
def test_sglang_accepts_every_passed_through_flag(compose: dict[str, Any], operator_files: dict[str, Path],
                                                   sglang_parser: argparse.ArgumentParser) -> None:
    for name, service in servers(compose).items():
        check_with_sglang(name, service, sglang_parser, operator_files)


@pytest.mark.sglang
@pytest.mark.parametrize("bad", [["--no-such-flag"], ["--schedule-policy", "nonsense"], ["--dp-size", "two"]])
def test_negative_control_a_bad_flag_is_caught(compose: dict[str, Any], bad: list[str],
                                              operator_files: dict[str, Path],
                                              sglang_parser: argparse.ArgumentParser) -> None:
    service = dict(compose["services"]["sglang-fair-dp"])
    service["command"] = [*service["command"], *bad]
    with pytest.raises(AssertionError, match="SGLang rejects"):
        check_with_sglang("sglang-fair-dp", service, sglang_parser, operator_files)


def test_check_override_only_feeds_the_build(compose: dict[str, Any]) -> None:
    """scripts/docker_check.sh builds the cpu image with compose.check.yaml and runs compose.yaml alone."""
    missing: list[str] = []
    override = interpolate(yaml.safe_load(CHECK.read_text()), missing)
    assert missing == [], f"variables without a default: {missing}"
    assert override["services"].keys() == {"sglang-fair-cpu"}
    (extra,) = override["services"].values()
    assert set(extra) == {"build"} and extra["build"]["network"] == "host", extra
    dockerfile = (ROOT / compose["services"]["sglang-fair-cpu"]["build"]["dockerfile"]).read_text()
    declared = {rest.split("=")[0] for word, rest in instructions(dockerfile) if word == "ARG"}
    assert set(extra["build"]["args"]) <= declared, set(extra["build"]["args"]) - declared


def mount_sources(service: dict[str, Any]) -> dict[str, str]:
    return {v["target"]: v["source"] for v in service.get("volumes", []) if isinstance(v, dict)}


def replica_problems(services: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    """What keeps the gateways ``names`` from sharing what they route (each names every other's peer
    port with that one's key pair, and its own pair is its own)."""
    problems = []
    argvs = {n: entrypoint(services[n]) + services[n]["command"] for n in names}
    for name, argv in argvs.items():
        key = flag_value(argv, "--feedback-key-name")
        peers = (flag_value(argv, "--peer-addresses") or "").split(",")
        wanted = [f"{flag_value(argvs[o], '--feedback-key-name')}@" for o in names if o != name]
        if flag_value(argv, "--peer-port") != "30090" or flag_value(argv, "--feedback-keys") != FEEDBACK_KEYS:
            problems.append(f"{name}: no CurveZMQ peer port 30090")
        if [p.split("@")[0] + "@" for p in peers] != wanted or key not in GATEWAYS:
            problems.append(f"{name}: key {key}, peers {peers}: not the other replicas' ({wanted})")
    if len({flag_value(a, "--feedback-key-name") for a in argvs.values()}) != len(names):
        problems.append("two replicas share one key pair")
    return problems


def fleet_cpu_problems(compose: dict[str, Any]) -> list[str]:
    """What keeps the fleet-cpu gateways from fronting its two servers (empty: nothing)."""
    services, problems = compose["services"], []
    cpu = services["sglang-fair-cpu"]
    for name in FLEET_CPU_SERVERS:
        server = services[name]
        if server["command"] != cpu["command"] + KEY_FLAGS + TOKEN_FLAGS + FEEDBACK_FLAGS:
            problems.append(f"{name}: not the cpu command plus the keys, the token and the feedback port")
        if (server["image"], server["healthcheck"]) != (cpu["image"], cpu["healthcheck"]):
            problems.append(f"{name}: not the cpu service's image and health check")
        if float(server["cpus"]) != 1 or server["environment"]["OMP_NUM_THREADS"] != "1":
            problems.append(f"{name}: not one core")
        for gw in FLEET_CPU_GATEWAYS:
            if mount_sources(server) != mount_sources(services[gw]):
                problems.append(f"{name}: other keys or token files than {gw}'s")
            if services[gw]["depends_on"].get(name, {}).get("condition") != "service_healthy":
                problems.append(f"{gw} does not wait for {name} to be healthy")
    wanted = [f"http://{n}:{flag_value(entrypoint(services[n]), '--port')}" for n in FLEET_CPU_SERVERS]
    for gw in FLEET_CPU_GATEWAYS:
        urls = flag_value(services[gw]["command"], "--worker-urls") or ""
        if urls.split(",") != wanted:
            problems.append(f"{gw}: --worker-urls {urls}, the servers are {wanted}")
        if services[gw]["image"] != cpu["image"] or services[gw]["profiles"] != ["fleet-cpu"]:
            problems.append(f"{gw} is not the cpu image's, in fleet-cpu")
    problems += replica_problems(services, FLEET_CPU_GATEWAYS)
    ports = {services[n]["ports"][0].rsplit(":", 1)[0] for n in (*FLEET_CPU_SERVERS, *FLEET_CPU_GATEWAYS[1:])}
    if len(ports) != len(FLEET_CPU_SERVERS) + 1 or not all(p.startswith("127.0.0.1:") for p in ports):
        problems.append(f"the servers' and gateway-2's published ports {ports}: one each, on 127.0.0.1")
    return problems


def test_fleet_cpu_is_two_cpu_servers_behind_two_gateways(compose: dict[str, Any]) -> None:
    assert fleet_cpu_problems(compose) == []
    assert {n for n, s in compose["services"].items() if "fleet-cpu" in s["profiles"]} == {
        *FLEET_CPU_SERVERS, *FLEET_CPU_GATEWAYS, "sglang-fair-cpu-lb"}


@pytest.mark.parametrize("fault", ["url", "depends", "token", "command", "feedback", "peer", "same key"])
def test_negative_control_a_broken_fleet_cpu_is_caught(compose: dict[str, Any], fault: str) -> None:
    broken = json.loads(json.dumps(compose))
    services = broken["services"]
    gateway, second = services["sglang-fair-cpu-gateway"], services["sglang-fair-cpu-gateway-2"]
    if fault == "url":
        second["command"][1] = "http://sglang-fair-cpu-a:30000,http://other:30000"
    elif fault == "depends":
        del gateway["depends_on"]["sglang-fair-cpu-b"]
    elif fault == "token":
        services["sglang-fair-cpu-b"]["volumes"] = services["sglang-fair-cpu-b"]["volumes"][:1]
    elif fault == "feedback":
        gateway["entrypoint"] = [a for a in gateway["entrypoint"] if a != "--feedback-keys"]
    elif fault == "peer":
        second["command"][-1] = "gateway-2@sglang-fair-cpu-gateway:30090"
    elif fault == "same key":
        second["command"][3] = "gateway"
    else:
        services["sglang-fair-cpu-a"]["command"] = services["sglang-fair-cpu-a"]["command"][:-2]
    assert fleet_cpu_problems(broken) != []


def test_fleet_server_trusts_the_gateways_in_front(compose: dict[str, Any]) -> None:
    """fleet: every node's server with the token, the gateway replicas (a node each) with the same files."""
    services = compose["services"]
    server = services["sglang-fair-fleet"]
    assert flag_value(server["command"], "--gateway-token-file") == TOKEN_TARGET
    assert server["command"][-6:] == FEEDBACK_FLAGS and "30100:30100" in server["ports"]
    names = ("sglang-fair-gateway", "sglang-fair-gateway-2")
    assert replica_problems(services, names) == []
    for name in names:
        gateway, argv = services[name], entrypoint(services[name]) + services[name]["command"]
        assert server["profiles"] == gateway["profiles"] == ["fleet"]
        assert flag_value(argv, "--feedback-keys") == FEEDBACK_KEYS
        assert mount_sources(gateway).items() <= mount_sources(server).items()
        assert flag_value(argv, "--gateway-token-file") == TOKEN_TARGET
        assert "depends_on" not in gateway  # its servers run on other nodes
        assert "deploy" not in gateway  # it needs no GPU
