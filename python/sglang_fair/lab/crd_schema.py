"""Write one version's OpenAPI schema of a CustomResourceDefinition as JSON, descriptions dropped.

``sglang-fair lab crd-schema CRD.yaml VERSION OUT.json``: how tests/deploy/crd_schemas/ was made from
the upstream CRDs named in its README (the chart's InferencePool and HTTPRoute are validated against them).
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("crd", help="the CustomResourceDefinition's YAML")
    parser.add_argument("version", help="the served version whose schema to write")
    parser.add_argument("out", help="the JSON file to write")
    args = parser.parse_args(argv)
    path, version, out = args.crd, args.version, args.out
    import yaml  # PyYAML: the dev extra's (kubernetes-validate's)

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
    raise SystemExit(main())
