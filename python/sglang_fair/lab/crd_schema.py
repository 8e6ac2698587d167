"""Write one version's OpenAPI schema of a CustomResourceDefinition as JSON, descriptions dropped.

``python scripts/crd_schema.py CRD.yaml VERSION OUT.json``: how tests/deploy/crd_schemas/ was made from
the upstream CRDs named in its README (the chart's InferencePool and HTTPRoute are validated against them).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml


def strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main(argv: list[str]) -> int:
    path, version, out = argv
    with open(path, encoding="utf-8") as f:
        crd = yaml.safe_load(f)
    (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = {"group": crd["spec"]["group"], "kind": crd["spec"]["names"]["kind"], "version": version,
              "openAPIV3Schema": strip(entry["schema"]["openAPIV3Schema"])}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(schema, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
