"""The Endpoint Picker Protocol's messages, built at run time from ``ext_proc.binpb``.

The descriptor set of the vendored protos (``protos/``, built by ``sglang-fair lab epp-descriptors``)
is loaded into a pool of its own, so these classes neither clash with other copies of Envoy's protos
in the process nor depend on the protobuf version that generated code would pin: any runtime from
4.21 on reads them. Needs the ``epp`` extra (protobuf).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

DESCRIPTORS = Path(__file__).with_name("ext_proc.binpb")
SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor"
HEALTH_SERVICE = "grpc.health.v1.Health"


def _load() -> descriptor_pool.DescriptorPool:
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTORS.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:  # protoc writes them dependencies first
        pool.Add(file)
    return pool


POOL = _load()


def message(full_name: str) -> Any:
    """The class of message ``full_name`` of the pool."""
    descriptor = POOL.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(POOL).GetPrototype(descriptor)  # protobuf < 4.22


_EXT = "envoy.service.ext_proc.v3."
ProcessingRequest = message(_EXT + "ProcessingRequest")
ProcessingResponse = message(_EXT + "ProcessingResponse")
HeadersResponse = message(_EXT + "HeadersResponse")
BodyResponse = message(_EXT + "BodyResponse")
TrailersResponse = message(_EXT + "TrailersResponse")
CommonResponse = message(_EXT + "CommonResponse")
HeaderMutation = message(_EXT + "HeaderMutation")
BodyMutation = message(_EXT + "BodyMutation")
StreamedBodyResponse = message(_EXT + "StreamedBodyResponse")
ImmediateResponse = message(_EXT + "ImmediateResponse")
HttpHeaders = message(_EXT + "HttpHeaders")
HttpBody = message(_EXT + "HttpBody")
HeaderValue = message("envoy.config.core.v3.HeaderValue")
HeaderValueOption = message("envoy.config.core.v3.HeaderValueOption")
HeaderMap = message("envoy.config.core.v3.HeaderMap")
Metadata = message("envoy.config.core.v3.Metadata")
HttpStatus = message("envoy.type.v3.HttpStatus")
Struct = message("google.protobuf.Struct")
Value = message("google.protobuf.Value")
ListValue = message("google.protobuf.ListValue")
HealthCheckRequest = message("grpc.health.v1.HealthCheckRequest")
HealthCheckResponse = message("grpc.health.v1.HealthCheckResponse")
ProcessingMode = message("envoy.extensions.filters.http.ext_proc.v3.ProcessingMode")


def enum_value(full_name: str, name: str) -> int:
    """The number of value ``name`` of enum ``full_name`` (e.g. a body send mode)."""
    return int(POOL.FindEnumTypeByName(full_name).values_by_name[name].number)


BUFFERED = enum_value("envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode", "BUFFERED")
SERVING = enum_value("grpc.health.v1.HealthCheckResponse.ServingStatus", "SERVING")
NOT_SERVING = enum_value("grpc.health.v1.HealthCheckResponse.ServingStatus", "NOT_SERVING")
SERVICE_UNKNOWN = enum_value("grpc.health.v1.HealthCheckResponse.ServingStatus", "SERVICE_UNKNOWN")
