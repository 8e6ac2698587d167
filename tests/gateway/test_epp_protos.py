"""The picker's descriptor set (``gateway/epp/ext_proc.binpb``, loaded at run time) is what protoc builds
from the vendored protos now (negative control: a proto with one field renumbered builds another set),
and it carries what the picker uses: the ext_proc service with its streaming method, the health check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("grpc_tools")
from google.protobuf import descriptor_pb2

from sglang_fair.lab import epp_descriptors

ROOT = Path(__file__).resolve().parents[2]
EPP = ROOT / "python" / "sglang_fair" / "gateway" / "epp"


def build(protos: Path, out: Path) -> descriptor_pb2.FileDescriptorSet:
    epp_descriptors.build(out, protos)
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def committed() -> descriptor_pb2.FileDescriptorSet:
    return descriptor_pb2.FileDescriptorSet.FromString((EPP / "ext_proc.binpb").read_bytes())


def test_the_committed_set_is_the_vendored_protos(tmp_path: Path) -> None:
    assert build(EPP / "protos", tmp_path / "set.binpb") == committed()


def test_negative_control_a_changed_proto_builds_another_set(tmp_path: Path) -> None:
    copy = tmp_path / "epp" / "protos"
    shutil.copytree(EPP / "protos", copy)
    proto = copy / "envoy" / "service" / "ext_proc" / "v3" / "external_processor.proto"
    text = proto.read_text()
    assert "google.protobuf.Struct dynamic_metadata = 8;" in text
    proto.write_text(text.replace("google.protobuf.Struct dynamic_metadata = 8;",
                                  "google.protobuf.Struct dynamic_metadata = 80;"))
    assert build(copy, tmp_path / "set.binpb") != committed()


def test_the_set_has_what_the_picker_uses() -> None:
    from sglang_fair.gateway.epp import messages as m

    service = m.POOL.FindServiceByName(m.SERVICE)
    process = service.methods_by_name["Process"]
    assert process.client_streaming and process.server_streaming
    assert process.input_type.full_name == "envoy.service.ext_proc.v3.ProcessingRequest"
    assert m.POOL.FindServiceByName(m.HEALTH_SERVICE).methods_by_name["Check"]
    assert m.ProcessingResponse.DESCRIPTOR.fields_by_name["dynamic_metadata"].number == 8
