"""Build the endpoint picker's descriptor set from the vendored protos (needs grpcio-tools, the dev extra).

``sglang-fair lab epp-descriptors [OUT]`` writes ``FileDescriptorSet`` of
``envoy/service/ext_proc/v3/external_processor.proto`` and ``grpc/health/v1/health.proto`` with every
import, without source info, to OUT (default: python/sglang_fair/gateway/epp/ext_proc.binpb).
"""

from __future__ import annotations

import argparse
from pathlib import Path

EPP = Path(__file__).resolve().parents[1] / "gateway" / "epp"
PROTOS = ("envoy/service/ext_proc/v3/external_processor.proto", "grpc/health/v1/health.proto")


def build(out: Path, protos: Path = EPP / "protos") -> None:
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    code = protoc.main(["protoc", f"-I{protos}", f"-I{well_known}", "--include_imports",
                        f"--descriptor_set_out={out}", *PROTOS])
    if code != 0:
        raise SystemExit(f"protoc failed ({code})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=EPP / "ext_proc.binpb",
                        help="where to write the descriptor set (default: the package's)")
    build(parser.parse_args(argv).out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
