"""docker/compose.yaml without a docker engine: it parses, names only files that exist (the operator's
keys file excepted, whose example must parse), and every service's command, after the image's
ENTRYPOINT, is accepted by the real parsers ``sglang-fair serve`` uses: the project's flags (validated as
``serve`` validates them) and SGLang's own (SGLang's argparse parser with the plugin's policy names;
that part needs the CPU SGLang install and imports it, ~10 s)."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import pytest
from deploy_support import DOCKER, ROOT, instructions

from sglang_fair.cli import build_parser
from sglang_fair.sglang_plugin.config import build_config
from sglang_fair.sglang_plugin.keys import load_key_file
from sglang_fair.sglang_plugin.launcher import check_combination
from sglang_fair.sglang_plugin.router_launch import check_router_args, flag_value, plan_router
from sglang_fair.sglang_plugin.router_link import router_settings

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the CPU SGLang set)")
COMPOSE = DOCKER / "compose.yaml"
CHECK = DOCKER / "compose.check.yaml"  # scripts/docker_check.sh's additions to the cpu profile
CHECK_FLAGS = ["--client-keys", "/etc/sglang-fair/keys.txt", "--fairness-admins", ""]
OPERATOR_FILES = {"./keys.txt": DOCKER / "keys.example.txt"}  # created by the operator from the example
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
def compose() -> dict[str, Any]:
    missing: list[str] = []
    doc = interpolate(yaml.safe_load(COMPOSE.read_text()), missing)
    assert missing == [], f"variables without a default: {missing}"
    return dict(doc)


def entrypoint(service: dict[str, Any]) -> list[str]:
    dockerfile = ROOT / service["build"]["dockerfile"]
    (args,) = [rest for word, rest in instructions(dockerfile.read_text()) if word == "ENTRYPOINT"]
    program, *argv = json.loads(args)
    assert program == "sglang-fair", dockerfile
    return argv


def host_argv(service: dict[str, Any]) -> list[str]:
    """ENTRYPOINT + command with each file argument that lives on a bind mount replaced by the host
    file (the operator's keys file by its example), so flags that read files are validated too."""
    mounts = {v["target"]: v["source"] for v in service.get("volumes", []) if isinstance(v, dict)}
    argv = entrypoint(service) + service["command"]
    for i, arg in enumerate(argv):
        if arg in mounts:
            source = mounts[arg]
            argv[i] = str(OPERATOR_FILES.get(source, DOCKER / source))
        else:
            assert not arg.startswith("/etc/"), f"{arg} is not mounted"
    return argv


def test_profiles_and_files(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {p for s in services.values() for p in s["profiles"]} == {"gpu", "dp", "cpu"}
    for name, service in services.items():
        assert (DOCKER / service["build"]["context"]).resolve() == ROOT, name
        assert (ROOT / service["build"]["dockerfile"]).is_file(), name
        assert service["restart"] == "unless-stopped" and "healthcheck" in service, name
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith((".", "/")):
                if source in OPERATOR_FILES:
                    assert load_key_file(str(OPERATOR_FILES[source])).enabled
                else:
                    assert (DOCKER / source).exists(), f"{name}: {source}"
            else:
                assert source in compose["volumes"], f"{name}: undeclared volume {source}"
    assert "docker/keys.txt" in (ROOT / "docs" / "deploy.md").read_text()  # the doc says to create it


def test_ports_match_the_commands(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        argv = entrypoint(service) + service["command"]
        inside = {int(p.rsplit(":", 1)[1]) for p in service["ports"]}
        expected = {int(flag_value(argv, "--port") or 0)}
        router_port = flag_value(argv, "--router-http-port")
        if router_port:
            expected.add(int(router_port))
            assert flag_value(argv, "--router-http-host") == "0.0.0.0", name  # reachable through the port
        assert inside == expected, name
        health = " ".join(service["healthcheck"]["test"])
        assert all(str(p) in health for p in expected), name
        assert service["labels"]["prometheus.io/port"] == flag_value(argv, "--port"), name


def test_project_flags_parse_and_validate(compose: dict[str, Any]) -> None:
    parser = build_parser()
    for name, service in compose["services"].items():
        args, extra = parser.parse_known_args(host_argv(service))
        assert args.command == "serve", name
        values = {k: getattr(args, k) for k in vars(args) if k not in ("func", "command", "pass_through")}
        config = build_config(values)  # serve's own validation: raises ConfigError on a bad value
        router_settings(args)
        if name == "sglang-fair-dp":
            assert plan_router(extra).policy == "fair_cache_aware"
            assert config.key_table.enabled


def check_with_sglang(name: str, service: dict[str, Any], sglang_parser: argparse.ArgumentParser) -> None:
    args, extra = build_parser().parse_known_args(host_argv(service))
    plan = plan_router(extra)
    try:
        server_args = sglang_parser.parse_args(plan.sglang_args)
    except (argparse.ArgumentError, SystemExit) as err:
        raise AssertionError(f"{name}: SGLang rejects {plan.sglang_args}: {err}") from err
    values = {k: getattr(args, k) for k in vars(args) if k not in ("func", "command", "pass_through")}
    check_combination(build_config(values), server_args)  # the launcher's checks after SGLang's parse
    assert check_router_args(plan, server_args).policy == plan.policy, name


def test_sglang_accepts_every_passed_through_flag(compose: dict[str, Any],
                                                   sglang_parser: argparse.ArgumentParser) -> None:
    for name, service in compose["services"].items():
        check_with_sglang(name, service, sglang_parser)


@pytest.mark.parametrize("bad", [["--no-such-flag"], ["--schedule-policy", "nonsense"], ["--dp-size", "two"]])
def test_negative_control_a_bad_flag_is_caught(compose: dict[str, Any], bad: list[str],
                                              sglang_parser: argparse.ArgumentParser) -> None:
    service = dict(compose["services"]["sglang-fair-dp"])
    service["command"] = [*service["command"], *bad]
    with pytest.raises(AssertionError, match="SGLang rejects"):
        check_with_sglang("sglang-fair-dp", service, sglang_parser)


def check_service(compose: dict[str, Any]) -> dict[str, Any]:
    """The cpu service as scripts/docker_check.sh runs it: compose.yaml's with compose.check.yaml merged
    as compose merges an override file (command replaced, volumes added, build keys and args merged)."""
    missing: list[str] = []
    override = interpolate(yaml.safe_load(CHECK.read_text()), missing)
    assert missing == [], f"variables without a default: {missing}"
    ((name, extra),) = override["services"].items()
    assert name == "sglang-fair-cpu" and set(extra) == {"build", "command", "volumes"}, extra
    base = compose["services"][name]
    return {**base, "command": extra["command"], "volumes": base.get("volumes", []) + extra["volumes"],
            "build": {**base["build"], **extra["build"]}}


def test_check_override_adds_only_the_key_flags(compose: dict[str, Any]) -> None:
    service = check_service(compose)
    assert service["command"] == compose["services"]["sglang-fair-cpu"]["command"] + CHECK_FLAGS
    assert service["build"]["network"] == "host"
    dockerfile = (ROOT / service["build"]["dockerfile"]).read_text()
    declared = {rest.split("=")[0] for word, rest in instructions(dockerfile) if word == "ARG"}
    assert set(service["build"]["args"]) <= declared, set(service["build"]["args"]) - declared


def test_check_service_passes_the_parsers(compose: dict[str, Any],
                                          sglang_parser: argparse.ArgumentParser) -> None:
    service = check_service(compose)
    args, _ = build_parser().parse_known_args(host_argv(service))
    values = {k: getattr(args, k) for k in vars(args) if k not in ("func", "command", "pass_through")}
    assert build_config(values).key_table.enabled
    check_with_sglang("sglang-fair-cpu (docker_check)", service, sglang_parser)
