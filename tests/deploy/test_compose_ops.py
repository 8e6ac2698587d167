"""What an operator puts in front and looks at, without a docker engine: the load balancer (HAProxy)
fronts exactly the gateway replicas, Prometheus's targets are the compose services on the ports they
serve, the configuration and rules pass Prometheus's own checker, and the Grafana dashboard asks only for
metrics the project (or HAProxy) exports, from the provisioned data source. ``scripts/docker_check.sh``
runs them for real (its ``monitoring`` and ``replicas`` steps)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deploy_support import DOCKER
from test_compose import FLEET_CPU_GATEWAYS, FLEET_CPU_SERVERS, entrypoint

from sglang_fair.dashboard.gateway_metrics import metrics_text
from sglang_fair.gateway.metrics_sum import merge
from sglang_fair.gateway.processes import ProcessView
from sglang_fair.harness.server import free_ports
from sglang_fair.sglang_plugin.client_gauges import FIGURES
from sglang_fair.sglang_plugin.router_launch import flag_value
from sglang_fair_router.http import prometheus_text

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the CPU SGLang set)")
REQUIRED = os.environ.get("SGLANG_FAIR_REQUIRE_TOOLS", "").split(",")  # .ci/run: these fail, not skip
HAPROXY_CFG = DOCKER / "haproxy" / "haproxy.cfg"
DASHBOARD = DOCKER / "grafana" / "dashboards" / "sglang-fair.json"
METRIC = re.compile(r"\b(sglang_fair[:_][a-z_:]+|haproxy_[a-z_]+)\b")
JOBS = {"sglang-fair": "servers", "sglang-fair-router": "routers", "sglang-fair-gateway": "gateways",
        "haproxy": "haproxy"}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if name in REQUIRED:
            pytest.fail(f"{name} is not installed (scripts/install_test_tools.sh)")
        pytest.skip(f"{name} is not installed (scripts/install_test_tools.sh)")
    return path


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    from test_compose import interpolate

    return dict(interpolate(yaml.safe_load((DOCKER / "compose.yaml").read_text()), []))


def lb_problems(compose: dict[str, Any]) -> list[str]:
    """What keeps the fleet-cpu load balancer from fronting the two gateway replicas (empty: nothing)."""
    services, problems = compose["services"], []
    lb = services["sglang-fair-cpu-lb"]
    wanted = [f"{g}:{flag_value(entrypoint(services[g]), '--port')}" for g in FLEET_CPU_GATEWAYS]
    if [lb["environment"]["GATEWAY_1"], lb["environment"]["GATEWAY_2"]] != wanted:
        problems.append(f"the load balancer's gateways are not {wanted}")
    if set(lb.get("depends_on", [])) != set(FLEET_CPU_GATEWAYS):
        problems.append("the load balancer does not start after both gateways")
    (target,) = [a for a in entrypoint_of(lb) if a.endswith(".cfg")]
    if mounts(compose, "sglang-fair-cpu-lb").get(target) != "./haproxy/haproxy.cfg":
        problems.append(f"{target} is not docker/haproxy/haproxy.cfg")
    binds = {int(m) for m in re.findall(r'bind "\$\{\w+-:(\d+)\}"', HAPROXY_CFG.read_text())}
    if {int(p.rsplit(":", 1)[1]) for p in lb["ports"]} != binds:
        problems.append(f"published ports {lb['ports']} are not haproxy.cfg's binds {binds}")
    return problems


def entrypoint_of(service: dict[str, Any]) -> list[str]:
    """The ENTRYPOINT of the service's Dockerfile."""
    build = service["build"]
    text = (DOCKER / build["context"] / build.get("dockerfile", "Dockerfile")).read_text()
    (line,) = [line for line in text.splitlines() if line.startswith("ENTRYPOINT")]
    return list(json.loads(line.split(None, 1)[1]))


def test_the_load_balancer_fronts_the_two_gateway_replicas(compose: dict[str, Any]) -> None:
    assert lb_problems(compose) == []
    fleet = compose["services"]["sglang-fair-lb"]
    assert fleet["profiles"] == ["fleet"] and fleet["environment"]["GATEWAY_2"] == "gw-node-2:30080"
    for name in ("sglang-fair-lb", "sglang-fair-cpu-lb", "prometheus"):
        service = compose["services"][name]
        assert service["restart"] == "unless-stopped" and "healthcheck" in service, name


@pytest.mark.parametrize("fault", ["gateway", "depends", "port"])
def test_negative_control_a_load_balancer_in_front_of_the_wrong_thing_is_caught(
        compose: dict[str, Any], fault: str) -> None:
    broken = json.loads(json.dumps(compose))
    lb = broken["services"]["sglang-fair-cpu-lb"]
    if fault == "gateway":
        lb["environment"]["GATEWAY_2"] = "sglang-fair-cpu-gateway:30080"
    elif fault == "depends":
        lb["depends_on"] = ["sglang-fair-cpu-gateway"]
    else:
        lb["ports"][0] = "30443:30444"
    assert lb_problems(broken) != []


def test_haproxys_own_check_accepts_the_config() -> None:
    env = dict(os.environ, GATEWAY_1="127.0.0.1:30080", GATEWAY_2="localhost:30081")
    done = subprocess.run([tool("haproxy"), "-c", "-f", str(HAPROXY_CFG)], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def prometheus_tree(tmp: Path, targets: str) -> Path:
    """docker/prometheus as the container sees it, under ``tmp`` (paths rewritten): its config file."""
    etc = tmp / "etc"
    shutil.copytree(DOCKER / "prometheus" / targets, etc / "targets")
    shutil.copy(DOCKER / "prometheus" / "alerts.yml", etc / "alerts.yml")
    (etc / "scrape.key").write_text("sk-monitoring\n")
    config = (DOCKER / "prometheus" / "prometheus.yml").read_text().replace("/etc/prometheus/", f"{etc}/")
    (etc / "prometheus.yml").write_text(config)
    return etc / "prometheus.yml"


@pytest.mark.parametrize("targets", ["fleet-cpu", "fleet"])
def test_promtool_accepts_the_config_the_rules_and_every_targets_directory(tmp_path: Path,
                                                                          targets: str) -> None:
    config = prometheus_tree(tmp_path, targets)
    jobs = {job["job_name"] for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    assert jobs == set(JOBS)
    for job, name in JOBS.items():
        assert isinstance(yaml.safe_load((config.parent / "targets" / f"{name}.yml").read_text()), list), job
    promtool = tool("promtool")
    for what in ("config", "rules"):
        path = config if what == "config" else config.parent / "alerts.yml"
        done = subprocess.run([promtool, "check", what, str(path)], capture_output=True, text=True)
        assert done.returncode == 0 and "SUCCESS" in done.stdout + done.stderr, done.stdout + done.stderr


def test_prometheus_gives_the_gauges_their_names_back() -> None:
    """prometheus_client 0.26 writes ``sglang_fair:service`` as ``sglang_fair_service`` when Prometheus asks
    for OpenMetrics (it escapes the colon): the servers' job renames every gauge back, and only those."""
    from prometheus_client import CollectorRegistry, Gauge
    from prometheus_client.exposition import choose_encoder

    registry = CollectorRegistry()
    Gauge("sglang_fair:service", "-", registry=registry).set(1.0)
    encoder, _ = choose_encoder("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
    assert "sglang_fair_service 1.0" in encoder(registry).decode()  # the escaping the rule undoes
    config = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "sglang-fair"]
    (rule,) = job["metric_relabel_configs"]
    names = re.fullmatch(r"sglang_fair_\((.+)\)", rule["regex"])
    assert names is not None and names.group(1).split("|") == list(FIGURES)
    assert (rule["target_label"], rule["replacement"]) == ("__name__", "sglang_fair:$1")


def target_problems(compose: dict[str, Any], directory: Path) -> list[str]:
    """What the fleet-cpu target files name that the compose services do not serve (empty: nothing)."""
    services = compose["services"]
    port = {n: flag_value(entrypoint(services[n]), "--port")
            for n in (*FLEET_CPU_SERVERS, *FLEET_CPU_GATEWAYS)}
    wanted = {"servers": [f"{n}:{port[n]}" for n in FLEET_CPU_SERVERS], "routers": [],
              "gateways": [f"{n}:{port[n]}" for n in FLEET_CPU_GATEWAYS],
              "haproxy": ["sglang-fair-cpu-lb:8404"]}
    problems = []
    for name, targets in wanted.items():
        groups = yaml.safe_load((directory / f"{name}.yml").read_text()) or []
        found = [t for group in groups for t in group["targets"]]
        if found != targets:
            problems.append(f"{name}.yml names {found}, the services are {targets}")
    return problems


def test_the_fleet_cpu_targets_are_the_compose_services(compose: dict[str, Any], tmp_path: Path) -> None:
    assert target_problems(compose, DOCKER / "prometheus" / "fleet-cpu") == []
    broken = tmp_path / "targets"
    shutil.copytree(DOCKER / "prometheus" / "fleet-cpu", broken)
    (broken / "gateways.yml").write_text("- targets: [sglang-fair-cpu-gateway:30090]\n")  # the peer port
    assert target_problems(compose, broken) != []  # negative control
    assert mounts(compose, "prometheus")["/etc/prometheus/targets"] == "./prometheus/fleet-cpu"


def exported_names() -> set[str]:
    """Every sample name the servers, the router and the gateway export (the gateway's and the router's
    from their own collectors, on stand-in state)."""
    names = {f"sglang_fair:{f}" for f in FIGURES}
    workers = [{"name": "w", "server": "http://a", "rank": 0, "queue": 1, "state": "out", "routed": 2,
                "finished": 1}]
    clients = SimpleNamespace(inflight={"a": 1})
    duties = SimpleNamespace(view=lambda: {"health": {"restarts": 1, "running": True}})
    process = ProcessView(0, 2, 1, "http-0.sock", SimpleNamespace(value=1))  # one of --workers 2
    config = SimpleNamespace(edge=SimpleNamespace(metrics_top_tenants=20))
    gateway = SimpleNamespace(router=SimpleNamespace(clients=clients), failed_over=0, duties=duties,
                              process=process, config=config)
    answers = {"http://a": {"clients": [{"client": "a", "weight": 1.0, "requests": 1}]}}
    page = SimpleNamespace(gateway=gateway, answers=answers,
                           book=SimpleNamespace(view=lambda: {"a": {"requests": 1}}),
                           workers=lambda: workers, stale={}, gap=lambda: {"value": 1.0},
                           bound=lambda: {"value": 2.0})
    snapshot = {"tree_tokens": 1, "inflight": 1, "counts": {"dispatched": 1}, "deficits": {"a": [1.0]},
                "workers": [{"worker": 0, "queue": 1, "alive": 1, "reported_inflight": 1, "send_backlog": 0,
                             "cached_tokens_estimate": 1, "hit_estimate": 0.5}],
                "submit_to_dispatch_us": {"p50": 1, "p99": 2, "p999": 3}}
    for text in (metrics_text(page), prometheus_text(lambda: snapshot)):  # type: ignore[arg-type]
        names |= sample_names(text.decode())
    merged = merge({0: metrics_text(page).decode()}, 0)  # type: ignore[arg-type]  # the shared port's
    return names | sample_names(merged.decode())


def sample_names(text: str) -> set[str]:
    """The sample names of a Prometheus text exposition."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {line.split("{")[0].split(" ")[0] for line in lines}


def haproxy_names() -> set[str]:
    """The metric names HAProxy's own exporter serves, read from a running HAProxy with the config."""
    lb, stats = free_ports(2)
    env = dict(os.environ, GATEWAY_1="127.0.0.1:1", GATEWAY_2="127.0.0.1:2", LB_BIND=f"127.0.0.1:{lb}",
               LB_STATS_BIND=f"127.0.0.1:{stats}")
    proc = subprocess.Popen([tool("haproxy"), "-db", "-f", str(HAPROXY_CFG)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{stats}/metrics", timeout=2) as resp:
                    text = resp.read().decode()
                return sample_names(text)
            except OSError:
                time.sleep(0.1)
        raise AssertionError("haproxy did not serve /metrics")
    finally:
        proc.terminate()
        proc.wait(10)


def unknown_metrics(dashboard: dict[str, Any], known: set[str]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    return sorted({m for e in exprs for m in METRIC.findall(e) if m not in known})


def test_the_dashboard_asks_only_for_exported_metrics_from_the_provisioned_source(
        compose: dict[str, Any]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    alerts = (DOCKER / "prometheus" / "alerts.yml").read_text()
    known = exported_names() | haproxy_names()
    assert unknown_metrics(dashboard, known) == []
    assert sorted(set(METRIC.findall(alerts)) - known) == []
    typo = json.loads(DASHBOARD.read_text())
    typo["panels"][1]["targets"][0]["expr"] = "rate(sglang_fair:servce[1m])"
    assert unknown_metrics(typo, known) == ["sglang_fair:servce"]  # negative control
    provisioning = DOCKER / "grafana" / "provisioning"
    source = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    (ds,) = source["datasources"]
    assert ds["url"] == "http://prometheus:9090" and "prometheus" in compose["services"]
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels and all(p["datasource"]["uid"] == ds["uid"] for p in panels)
    assert all(t["datasource"]["uid"] == ds["uid"] for p in panels for t in p["targets"])
    provider = yaml.safe_load((provisioning / "dashboards" / "sglang-fair.yml").read_text())
    grafana = mounts(compose, "grafana")
    assert grafana[provider["providers"][0]["options"]["path"]] == "./grafana/dashboards"
    assert grafana["/etc/grafana/provisioning"] == "./grafana/provisioning"


def mounts(compose: dict[str, Any], name: str) -> dict[str, str]:
    """A service's bind mounts, target -> source."""
    return {v["target"]: v["source"] for v in compose["services"][name]["volumes"] if isinstance(v, dict)}


def test_the_deploy_docs_show_the_files_that_run_and_every_gateway_metric() -> None:
    docs = DOCKER.parent / "docs"
    pages = ("guides/deploy.md", "guides/fleet.md", "reference/metrics.md")
    doc = "".join((docs / d).read_text() for d in pages)
    assert f"```haproxy\n{HAPROXY_CFG.read_text()}```" in doc  # the lines the deploy guide shows are run
    assert f"```yaml\n{(DOCKER / 'prometheus' / 'alerts.yml').read_text()}```" in doc
    named = set(re.findall(r"sglang_fair_gateway_\w+", doc))
    exported = {n for n in exported_names() if n.startswith("sglang_fair_gateway_")}
    assert named == exported, named ^ exported
