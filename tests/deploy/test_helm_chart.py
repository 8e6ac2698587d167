"""helm/sglang-fair without a cluster: Helm 4's SDK renders and lints it, every object passes Kubernetes'
schemas of two minor versions (strict) or its CRD's schema, the servers' and gateways' commands pass the
real parsers (sglang-fair's and SGLang's), and the pieces point at each other (ports, names, Secrets,
probes on endpoints that exist). Negative controls: broken manifests and values are caught."""

from __future__ import annotations

import argparse
import copy
import secrets
from pathlib import Path
from typing import Any

import pytest
from deploy_support import DOCKER
from helm_support import K8S_VERSIONS, by_kind, container, lint, one, problems, render

from sglang_fair.cli import build_parser
from sglang_fair.gateway.config import gateway_config
from sglang_fair.links.curve import make_keys
from sglang_fair.sglang_plugin.config import build_config
from sglang_fair.sglang_plugin.launcher import check_combination
from sglang_fair.sglang_plugin.router_launch import plan_router

EPP_ALL = {"epp": {"tlsSecret": "epp-tls", "inferencePool": {"enabled": True},
                   "httpRoute": {"enabled": True}}}
VALUE_SETS = {
    "defaults": {},
    "epp-all": EPP_ALL,
    "multi-node": {"server": {"multiNode": {"enabled": True}}, **EPP_ALL},
    "tp2-no-epp": {"server": {"tpSize": 2, "extraArgs": ["--enable-cache-report"]}, "epp": {"enabled": False},
                   "modelVolume": {"persistentVolumeClaim": {"claimName": "models"}}, "hfTokenSecret": "hf",
                   "gateway": {"mountModels": True}},
}


@pytest.fixture(scope="module", params=list(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    values = VALUE_SETS[request.param]
    return values, render(values)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """What the operator's Secrets hold, at the paths the pods mount them."""
    tmp = tmp_path_factory.mktemp("secrets")
    (tmp / "gateway.token").write_text(secrets.token_hex(32) + "\n")
    make_keys(tmp / "feedback")
    for name in ("tls.crt", "tls.key"):  # read at start-up; their PEM is the gRPC server's to parse
        (tmp / name).write_text("-----BEGIN PLACEHOLDER-----\n")
    return {"/etc/sglang-fair/epp-tls/tls.crt": tmp / "tls.crt",
            "/etc/sglang-fair/epp-tls/tls.key": tmp / "tls.key",
            "/etc/sglang-fair/keys/keys.txt": DOCKER / "keys.example.txt",
            "/etc/sglang-fair/token/gateway.token": tmp / "gateway.token",
            "/etc/sglang-fair/feedback": tmp / "feedback"}


def argv(c: dict[str, Any], files: dict[str, Path]) -> list[str]:
    """The container's command and args after ``sglang-fair``, files from the Secrets, env filled in."""
    env = {"$(LWS_WORKER_INDEX)": "0", "$(LWS_LEADER_ADDRESS)": "leader", "$(POD_NAME)": "demo-gateway-0"}
    program, *rest = c["command"] + c["args"]
    assert program == "sglang-fair"
    out = []
    for arg in rest:
        for var, value in env.items():
            arg = arg.replace(var, value)
        out.append(str(files.get(arg, arg)))
    return out


def test_lint_is_clean() -> None:
    for values in VALUE_SETS.values():
        assert lint(values) == []


def test_every_object_passes_its_schema(rendered: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    _, docs = rendered
    assert docs
    for version in K8S_VERSIONS:
        for doc in docs:
            assert problems(doc, version) == [], (version, doc["kind"], doc["metadata"]["name"])


BREAKAGES = {
    "replicas not a number": ("StatefulSet", lambda d: d["spec"].__setitem__("replicas", "two")),
    "misspelt field": ("Deployment", lambda d: d["spec"]["template"]["spec"].__setitem__("hostIpc", True)),
    "probe without a port": ("StatefulSet", lambda d: container(d)["readinessProbe"]["httpGet"].pop("port")),
    "pool without ports": ("InferencePool", lambda d: d["spec"].pop("targetPorts")),
    "route to an unknown field": ("HTTPRoute", lambda d: d["spec"]["rules"][0].__setitem__("backend", [])),
    "lws pod misspelt": ("LeaderWorkerSet", lambda d: d["spec"]["leaderWorkerTemplate"]["workerTemplate"]
                         ["spec"].__setitem__("containerz", [])),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_negative_control_a_broken_manifest_is_caught(breakage: str) -> None:
    kind, damage = BREAKAGES[breakage]
    values = VALUE_SETS["multi-node" if kind == "LeaderWorkerSet" else "epp-all"]
    doc = copy.deepcopy(one(render(values), kind))
    assert problems(doc, K8S_VERSIONS[-1]) == []
    damage(doc)
    for version in K8S_VERSIONS:
        assert problems(doc, version) != [], (breakage, version)


@pytest.mark.parametrize("values, error", [
    ({"server": {"gpusPerNode": "eight"}}, "want integer"),
    ({"server": {"gpusPerNode": 6, "tpSize": 4}}, "multiple of server.tpSize"),  # a template's own check
    ({"epp": {"inferencePool": {"failureMode": "Sometimes"}}}, "failureMode"),
    ({"gateway": {"replicas": 0}}, "replicas"),
])
def test_negative_control_bad_values_are_refused(values: dict[str, Any], error: str) -> None:
    with pytest.raises(Exception, match=error):
        render(values)
    if "multiple" not in error:  # lint runs the schema; a template's `fail` it only logs
        assert lint(values) != []


def test_commands_pass_the_real_parsers(rendered: tuple[dict[str, Any], list[dict[str, Any]]],
                                        files: dict[str, Path],
                                        sglang_parser: argparse.ArgumentParser) -> None:
    values, docs = rendered
    parser = build_parser()
    gateway = gateway_config(parser.parse_args(argv(container(one(docs, "Deployment")), files)))
    edge = gateway.edge
    assert edge.key_table.enabled and edge.gateway_token.enabled and gateway.curve_keys is not None
    assert (gateway.ext_proc.port > 0) == values.get("epp", {}).get("enabled", True)
    workloads = by_kind(docs, "StatefulSet") + by_kind(docs, "LeaderWorkerSet")
    templates = ["leaderTemplate", "workerTemplate"] if by_kind(docs, "LeaderWorkerSet") else ["template"]
    for template in templates:
        args, extra = parser.parse_known_args(argv(container(workloads[0], template), files))
        assert args.command == "serve"
        config = build_config({k: getattr(args, k) for k in vars(args)
                               if k not in ("func", "command", "pass_through")})
        assert config.edge.key_table.enabled
        plan = plan_router(extra)
        try:
            server_args = sglang_parser.parse_args(plan.sglang_args)
        except (argparse.ArgumentError, SystemExit) as err:
            raise AssertionError(f"SGLang rejects {plan.sglang_args}: {err}") from err
        check_combination(config, server_args)
