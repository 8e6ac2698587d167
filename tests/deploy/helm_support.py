"""The Helm chart (helm/sglang-fair) rendered and validated offline: Helm 4's SDK renders and lints it
(helm-python-sdk), each core object is checked against Kubernetes' own schemas (kubernetes-validate,
strict: unknown fields are errors), the Gateway API objects against their CRDs' schemas
(crd_schemas/), the LeaderWorkerSet's pod templates as core PodTemplates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deploy_support import ROOT

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (the dev extra)")
kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (the dev extra)")
yaml = pytest.importorskip("yaml", reason="PyYAML")
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (with kubernetes-validate)")

CHART = ROOT / "helm" / "sglang-fair"
K8S_VERSIONS = ("1.36.0", "1.37.0")  # the two newest minors kubernetes-validate 1.37.0 ships schemas for
CRDS = {("inference.networking.k8s.io/v1", "InferencePool"): "inferencepool-v1.json",
        ("gateway.networking.k8s.io/v1", "HTTPRoute"): "httproute-v1.json"}
LWS_FIELDS = {  # leaderworkerset.x-k8s.io/v1 (its API types; its CRD is not vendored)
    "spec": {"replicas", "leaderWorkerTemplate", "rolloutStrategy", "startupPolicy", "networkConfig"},
    "leaderWorkerTemplate": {"leaderTemplate", "workerTemplate", "size", "restartPolicy", "subGroupPolicy"},
}

Doc = dict[str, Any]


def render(values: dict[str, Any] | None = None, name: str = "demo", namespace: str = "llm") -> list[Doc]:
    """The chart's objects for ``values`` (raises the SDK's error for values its schema refuses)."""
    with helm.Chart.load(str(CHART)) as chart:
        out = chart.render(values or {}, name=name, namespace=namespace)
    docs: list[Doc] = []
    for path, text in sorted(out.items()):
        if path.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def lint(values: dict[str, Any] | None = None) -> list[str]:
    """``helm lint --strict`` messages above INFO (severity 1: "icon is recommended")."""
    report = helm.lint(str(CHART), values=values or {}, strict=True, kube_version=K8S_VERSIONS[-1])
    return [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] > 1]


def unknown_fields(doc: Any, schema: dict[str, Any], where: str = "") -> Iterator[str]:
    """Fields of ``doc`` that an object schema without additionalProperties does not name (an API
    server with strict field validation refuses them; a JSON schema alone lets them pass)."""
    if isinstance(doc, dict) and "properties" in schema:
        for key, value in doc.items():
            if key not in schema["properties"]:
                if "additionalProperties" not in schema:
                    yield f"{where}/{key}: unknown field"
            else:
                yield from unknown_fields(value, schema["properties"][key], f"{where}/{key}")
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(doc):
            yield from unknown_fields(item, schema["items"], f"{where}[{i}]")


def crd_problems(doc: Doc, schema_file: str) -> list[str]:
    schema = json.loads((Path(__file__).parent / "crd_schemas" / schema_file).read_text())["openAPIV3Schema"]
    found = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
             for e in jsonschema.Draft7Validator(schema).iter_errors(doc)]
    return found + list(unknown_fields(doc, schema))


def core_problems(doc: Doc, version: str) -> list[str]:
    try:
        kv.validate(doc, version, strict=True)
    except kv.ValidationError as err:
        return [f"{'/'.join(map(str, err.path))}: {err.message}"]
    return []


def lws_problems(doc: Doc, version: str) -> list[str]:
    spec = doc.get("spec", {})
    found = [f"spec/{k}: unknown field" for k in set(spec) - LWS_FIELDS["spec"]]
    template = spec.get("leaderWorkerTemplate", {})
    found += [f"spec/leaderWorkerTemplate/{k}: unknown field"
              for k in set(template) - LWS_FIELDS["leaderWorkerTemplate"]]
    if not isinstance(template.get("size"), int) or template["size"] < 1:
        found.append("spec/leaderWorkerTemplate/size: an integer >= 1 is required")
    for part in ("leaderTemplate", "workerTemplate"):
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": part.lower()},
               "template": template.get(part, {})}
        found += [f"{part}/{p}" for p in core_problems(pod, version)]
    return found


def problems(doc: Doc, version: str) -> list[str]:
    """What is wrong with ``doc`` for Kubernetes ``version`` (empty: nothing found)."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in CRDS:
        return crd_problems(doc, CRDS[key])
    if key == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"):
        return lws_problems(doc, version)
    return core_problems(doc, version)


def by_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[Doc], kind: str, suffix: str = "") -> Doc:
    (found,) = [d for d in by_kind(docs, kind) if d["metadata"]["name"].endswith(suffix)]
    return found


def container(workload: Doc, template: str = "template") -> Doc:
    spec = workload["spec"]
    pod = spec["leaderWorkerTemplate"][template] if workload["kind"] == "LeaderWorkerSet" else spec[template]
    (found,) = pod["spec"]["containers"]
    return dict(found)
