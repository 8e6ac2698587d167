"""The endpoint picker's gRPC server: ``envoy.service.ext_proc.v3.ExternalProcessor/Process`` and the
standard health service (``grpc.health.v1.Health/Check``: ``""``, ``liveness``, ``readiness`` and the
ext_proc service's name, as the Endpoint Picker Protocol asks), in the gateway's event loop, so both
fronts share one policy without locks. Plaintext, or TLS with ``--ext-proc-tls-cert/-key``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from sglang_fair.core.errors import ConfigError
from sglang_fair.gateway.epp import messages as m
from sglang_fair.gateway.epp.config import ExtProcConfig
from sglang_fair.gateway.ext_proc import Picker, PickerFront

HEALTH_NAMES = ("", "liveness", "readiness", m.SERVICE)


class PickerServer:
    """The gRPC server of one :class:`Picker`; ``ready()`` says whether a request can be placed."""

    def __init__(self, picker: Picker, ready: Callable[[], bool]) -> None:
        self.picker, self.ready = picker, ready
        self.server: Any = None
        self.port = 0

    async def check(self, request: Any, context: Any) -> Any:
        if request.service not in HEALTH_NAMES:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        serving = request.service == "liveness" or self.ready()
        return m.HealthCheckResponse(status=m.SERVING if serving else m.NOT_SERVING)

    async def start(self, config: ExtProcConfig) -> None:
        process = grpc.stream_stream_rpc_method_handler(
            self.picker.process, request_deserializer=m.ProcessingRequest.FromString,
            response_serializer=m.ProcessingResponse.SerializeToString)
        check = grpc.unary_unary_rpc_method_handler(
            self.check, request_deserializer=m.HealthCheckRequest.FromString,
            response_serializer=m.HealthCheckResponse.SerializeToString)
        self.server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])  # a port in use is an error
        self.server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler(m.SERVICE, {"Process": process}),
            grpc.method_handlers_generic_handler(m.HEALTH_SERVICE, {"Check": check})))
        address = f"{config.host}:{config.port}"
        pem = config.credentials()
        try:
            if pem is None:
                self.port = self.server.add_insecure_port(address)
            else:
                certificate, key = pem
                credentials = grpc.ssl_server_credentials([(key, certificate)])
                self.port = self.server.add_secure_port(address, credentials)
        except RuntimeError as err:
            raise ConfigError(f"--ext-proc-port: cannot listen on {address}: {err}") from None
        await self.server.start()

    async def stop(self, grace: float = 1.0) -> None:
        if self.server is not None:
            await self.server.stop(grace)


async def serve_picker(front: PickerFront, config: ExtProcConfig, ready: Callable[[], bool]) -> PickerServer:
    """Start the picker on ``config``'s address."""
    server = PickerServer(Picker(front), ready)
    await server.start(config)
    return server
