"""helm/sglang-fair's pieces point at each other: the gateway's --worker-urls name the servers' stable
DNS names, its --peer-addresses the headless Service of its own pods, the InferencePool the servers and
the picker's port; every port a flag opens is a named container port, every file a flag reads comes from
the operator's Secrets, GPUs match the DP and TP sizes, and the probes ask endpoints that exist.
Negative control: each fault, put into a rendered chart, is named by the check."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit

import pytest
from helm_support import by_kind, container, one, render

from sglang_fair.sglang_plugin.router_launch import flag_value

NS = "llm"
SERVER_PROBES = {"startupProbe": "/health", "readinessProbe": "/health", "livenessProbe": "/health_generate"}
Doc = dict[str, Any]


def pod(workload: Doc, template: str = "template") -> Doc:
    spec = workload["spec"]
    lws = workload["kind"] == "LeaderWorkerSet"
    return dict(spec["leaderWorkerTemplate"][template] if lws else spec[template])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def argv(c: Doc) -> list[str]:
    return [str(a) for a in c["command"] + c["args"]]


def port_problems(c: Doc, flags: dict[str, str]) -> list[str]:
    ports = {p["name"]: str(p["containerPort"]) for p in c["ports"]}
    return [f"{c['name']}: {flag} {flag_value(argv(c), flag)} is not its '{name}' port {ports.get(name)}"
            for name, flag in flags.items() if flag_value(argv(c), flag) != ports.get(name)]


def file_problems(p: Doc, c: Doc, values: Doc) -> list[str]:
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in p["spec"]["volumes"]}
    wanted = {values["secrets"][k] for k in ("keys", "gatewayToken", "feedbackKeys")}
    wanted.add(values["epp"]["tlsSecret"])
    out = []
    for arg in argv(c):
        if arg.startswith("/etc/sglang-fair/"):
            mount = next((m for m in mounts if arg == m or arg.startswith(m + "/")), None)
            secret = volumes.get(mounts.get(mount, ""), {}).get("secret", {}).get("secretName")
            if secret not in wanted:
                out.append(f"{c['name']}: {arg} is not on a mounted Secret of the values")
    return out


def servers(docs: list[Doc]) -> tuple[Doc, str]:
    """The servers' workload and the template of the pod that serves HTTP."""
    (workload,) = by_kind(docs, "StatefulSet") + by_kind(docs, "LeaderWorkerSet")
    return workload, "leaderTemplate" if workload["kind"] == "LeaderWorkerSet" else "template"


def server_problems(docs: list[Doc], values: Doc) -> list[str]:
    workload, template = servers(docs)
    p, c = pod(workload, template), container(workload, template)
    out = port_problems(c, {"http": "--port", "feedback": "--feedback-port"}) + file_problems(p, c, values)
    server = values["server"]
    tp = int(flag_value(argv(c), "--tp-size") or 1)
    dp = int(flag_value(argv(c), "--dp-size") or 1)
    gpus = int(c["resources"]["limits"]["nvidia.com/gpu"])
    nodes = server["multiNode"]["nodesPerServer"] if server["multiNode"]["enabled"] else 1
    if dp * tp != gpus * nodes:
        out.append(f"server: dp {dp} x tp {tp} is not its {gpus} GPUs x {nodes} nodes")
    probes = {k: c.get(k, {}).get("httpGet", {}).get("path") for k in SERVER_PROBES}
    if probes != SERVER_PROBES:
        out.append(f"server probes {probes}")
    shm = [v for v in p["spec"]["volumes"] if v["name"] == "dshm"]
    if not shm or shm[0]["emptyDir"].get("medium") != "Memory" or \
            {"name": "dshm", "mountPath": "/dev/shm"} not in c["volumeMounts"]:
        out.append("server: no memory-backed /dev/shm")
    notes = p["metadata"].get("annotations", {})
    if notes.get("prometheus.io/port") != flag_value(argv(c), "--port"):
        out.append(f"server: scrape annotations {notes}")
    return out


def gateway_problems(docs: list[Doc], values: Doc) -> list[str]:
    deployment = one(docs, "Deployment", "-gateway")
    p, c = pod(deployment), container(deployment)
    flags = {"http": "--port", "peer": "--peer-port"}
    if values["epp"]["enabled"]:
        flags["grpc"] = "--ext-proc-port"
    out = port_problems(c, flags) + file_problems(p, c, values)
    workload, template = servers(docs)
    name = workload["metadata"]["name"]
    service = workload["spec"].get("serviceName", name)  # LeaderWorkerSet: a headless Service of its name
    port = flag_value(argv(container(workload, template)), "--port")
    expected = [f"{name}-{i}.{service}.{NS}.svc.cluster.local:{port}"
                for i in range(workload["spec"]["replicas"])]
    urls = [urlsplit(u).netloc for u in flag_value(argv(c), "--worker-urls").split(",")]
    if urls != expected:
        out.append(f"gateway --worker-urls {urls}, servers {expected}")
    if workload["kind"] == "StatefulSet":
        governing = [s for s in by_kind(docs, "Service") if s["metadata"]["name"] == service]
        if len(governing) != 1 or governing[0]["spec"].get("clusterIP") != "None" \
                or not selects(governing[0]["spec"]["selector"], pod(workload)["metadata"]["labels"]):
            out.append("servers: their serviceName is not a headless Service selecting them")
    host, _, port = flag_value(argv(c), "--peer-addresses").rpartition("@")[2].rpartition(":")
    peers = [s for s in by_kind(docs, "Service") if host == f"{s['metadata']['name']}.{NS}.svc.cluster.local"]
    if len(peers) != 1 or peers[0]["spec"].get("clusterIP") != "None" \
            or port != flag_value(argv(c), "--peer-port") \
            or not selects(peers[0]["spec"]["selector"], p["metadata"]["labels"]):
        out.append(f"gateway --peer-addresses {host}:{port} is not a headless Service of the gateway pods")
    annotations = p["metadata"].get("annotations", {})
    if c["livenessProbe"]["httpGet"]["path"] != "/health" or "prometheus.io/scrape" in annotations:
        out.append("gateway: probe or scrape annotations")
    return out


def pool_problems(docs: list[Doc], values: Doc) -> list[str]:
    pools, out = by_kind(docs, "InferencePool"), []
    for pool in pools:
        workload, template = servers(docs)
        leader = pod(workload, template)
        selector = pool["spec"]["selector"]["matchLabels"]
        if workload["kind"] == "LeaderWorkerSet":  # LWS labels its pods with their index
            labels = {**leader["metadata"]["labels"], "leaderworkerset.sigs.k8s.io/worker-index": "0"}
            leader = {"metadata": {"labels": labels}}
        gateway_pod = pod(one(docs, "Deployment", "-gateway"))
        if not selects(selector, leader["metadata"]["labels"]) \
                or selects(selector, gateway_pod["metadata"]["labels"]):
            out.append(f"pool selector {selector} does not pick exactly the servers")
        ref = pool["spec"]["endpointPickerRef"]
        service = next((s for s in by_kind(docs, "Service") if s["metadata"]["name"] == ref["name"]), None)
        if service is None or ref["port"]["number"] not in [p["port"] for p in service["spec"]["ports"]]:
            out.append(f"pool endpointPickerRef {ref} is no port of a Service")
    for route in by_kind(docs, "HTTPRoute"):
        names = [b["name"] for r in route["spec"]["rules"] for b in r["backendRefs"]]
        if names != [pool["metadata"]["name"] for pool in pools]:
            out.append(f"route backends {names}")
    return out


def wiring_problems(docs: list[Doc], values: Doc) -> list[str]:
    return server_problems(docs, values) + gateway_problems(docs, values) + pool_problems(docs, values)


def defaults() -> Doc:
    import helm_python
    from helm_support import CHART
    with helm_python.Chart.load(str(CHART)) as chart:
        return dict(chart.values)


def merged(base: Doc, extra: Doc) -> Doc:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = merged(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


VALUE_SETS = {
    "defaults": {},
    "epp-all": {"epp": {"tlsSecret": "epp-tls", "inferencePool": {"enabled": True},
                        "httpRoute": {"enabled": True}}},
    "multi-node": {"server": {"multiNode": {"enabled": True}, "replicas": 3},
                   "epp": {"inferencePool": {"enabled": True}, "httpRoute": {"enabled": True}}},
    "tp2-no-epp": {"server": {"tpSize": 2, "replicas": 4}, "gateway": {"replicas": 3},
                   "epp": {"enabled": False}},
}


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_the_pieces_point_at_each_other(name: str) -> None:
    values = merged(defaults(), VALUE_SETS[name])
    assert wiring_problems(render(values, namespace=NS), values) == []


def test_probed_paths_exist() -> None:
    """The servers' probes are SGLang's own routes, the gateway's its app's."""
    from pathlib import Path

    sglang = pytest.importorskip("sglang", reason="SGLang not installed")
    source = (Path(sglang.__file__).parent / "srt" / "entrypoints" / "http_server.py").read_text()
    for path in ("/health", "/health_generate"):
        assert f'@app.get("{path}")' in source
    pytest.importorskip("fastapi")
    from sglang_fair.gateway import front as app

    assert 'add_api_route("/health"' in Path(app.__file__).read_text()


def _first_server(docs: list[Doc]) -> Doc:
    workload, template = servers(docs)
    return container(workload, template)


def _gateway(docs: list[Doc]) -> Doc:
    return container(one(docs, "Deployment", "-gateway"))


SHM = "/dev/shm"
OTHER_NS_URL = "http://demo-server-0.demo-server.other.svc.cluster.local:30000"
FAULTS = {
    "worker URL of another namespace": lambda d: _set_flag(_gateway(d), "--worker-urls", OTHER_NS_URL),
    "peer address not the headless Service": lambda d: _set_flag(
        _gateway(d), "--peer-addresses", "gateway@demo-gateway.llm.svc.cluster.local:30090"),
    "keys file off the Secret": lambda d: _set_flag(_first_server(d), "--client-keys", "/etc/sglang-fair/k"),
    "one GPU short": lambda d: _first_server(d)["resources"]["limits"].__setitem__("nvidia.com/gpu", 7),
    "liveness on the wrong path": lambda d: _first_server(d)["livenessProbe"]["httpGet"].update(path="/"),
    "picker port not the flag's": lambda d: _set_flag(_gateway(d), "--ext-proc-port", "9003"),
    "pool selecting the gateways": lambda d: one(d, "InferencePool")["spec"]["selector"]["matchLabels"].pop(
        "app.kubernetes.io/component"),
    "no /dev/shm": lambda d: _first_server(d)["volumeMounts"].remove({"name": "dshm", "mountPath": SHM}),
}


def _set_flag(c: Doc, flag: str, value: str) -> None:
    args = c["args"]
    args[args.index(flag) + 1] = value


@pytest.mark.parametrize("fault", list(FAULTS))
def test_negative_control_a_miswired_chart_is_caught(fault: str) -> None:
    values = merged(defaults(), VALUE_SETS["epp-all"])
    docs = render(values, namespace=NS)
    FAULTS[fault](docs)
    assert wiring_problems(docs, values) != [], fault


@pytest.mark.parametrize("mount", [False, True])
def test_the_gateway_reads_the_models_volume_only_when_asked(mount: bool) -> None:
    """``gateway.mountModels``: the servers' model volume at the same path, read-only (so that
    ``--tokenizer auto`` finds the tokenizer the servers' ``/server_info`` names); off by default, since
    a volume one node may attach would keep gateway pods on other nodes from starting."""
    claim = {"persistentVolumeClaim": {"claimName": "models"}}
    docs = render({"model": "/models/llama", "modelVolume": claim, "gateway": {"mountModels": mount}})
    gateway = one(docs, "Deployment", "-gateway")
    mounts = {m["mountPath"]: m for m in container(gateway).get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod(gateway)["spec"]["volumes"]}
    if not mount:
        assert "/models" not in mounts and "models" not in volumes
        return
    assert mounts["/models"]["readOnly"] and volumes[mounts["/models"]["name"]]["persistentVolumeClaim"] == \
        claim["persistentVolumeClaim"]
    (server,) = by_kind(docs, "StatefulSet")
    served = {m["mountPath"]: m["name"] for m in container(server).get("volumeMounts", [])}
    assert served["/models"] == mounts["/models"]["name"]  # the path /server_info names is the same here
