"""Build the endpoint picker's descriptor set from the vendored protos (needs grpcio-tools, the dev extra).

``python scripts/build_epp_descriptors.py [OUT]`` writes ``FileDescriptorSet`` of
``envoy/service/ext_proc/v3/external_processor.proto`` and ``grpc/health/v1/health.proto`` with every
import, without source info, to OUT (default: python/sglang_fair/gateway/epp/ext_proc.binpb).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EPP = ROOT / "python" / "sglang_fair" / "gateway" / "epp"
PROTOS = ("envoy/service/ext_proc/v3/external_processor.proto", "grpc/health/v1/health.proto")


def build(out: Path) -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    code = protoc.main(["protoc", f"-I{EPP / 'protos'}", f"-I{well_known}", "--include_imports",
                        f"--descriptor_set_out={out}", *PROTOS])
    if code != 0:
        raise SystemExit(f"protoc failed ({code})")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else EPP / "ext_proc.binpb")
