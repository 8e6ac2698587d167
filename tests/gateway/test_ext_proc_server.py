"""The endpoint picker's server around the protocol: the gRPC health service the protocol asks for, TLS
(negative control: a plaintext client is refused), a data plane that sends the request body BUFFERED
(the body comes back whole, not streamed), the picker under uvloop (uvicorn's loop where it is
installed, as in SGLang's images), and a picker that cannot bind its port (a clear error)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")
pytest.importorskip("grpc_tools")
import grpc
import grpc.aio
from envoy_client import MiniEnvoy
from fake_sglang import FakeSGLang, Running
from test_ext_proc import generate, picker, scenario
from test_gateway import gateway_at

from sglang_fair.core.errors import ConfigError
from sglang_fair.gateway.epp.config import ExtProcConfig
from sglang_fair.gateway.ext_proc import Picker
from sglang_fair.gateway.ext_proc_server import PickerServer

pytestmark = pytest.mark.timers  # the gateway keeps timers (health, liveness, the picker's cache)


async def check(channel: Any, health: Any, service: str) -> Any:
    call = channel.unary_unary("/grpc.health.v1.Health/Check",
                               request_serializer=health.HealthCheckRequest.SerializeToString,
                               response_deserializer=health.HealthCheckResponse.FromString)
    return await call(health.HealthCheckRequest(service=service))


def test_health_service_answers_the_protocols_names(pb: tuple[Any, ...]) -> None:
    health = pb[3]
    with Running(FakeSGLang()) as urls:
        async def body(envoy: MiniEnvoy, gateway: Any, _: str) -> None:
            for name in ("", "liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"):
                assert (await check(envoy.channel, health, name)).status == health.HealthCheckResponse.SERVING
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await check(envoy.channel, health, "nonsense")
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            gateway.supervisor.health.take_out(urls[0], "test")  # no worker left: not ready, still alive
            assert (await check(envoy.channel, health, "readiness")).status == \
                health.HealthCheckResponse.NOT_SERVING
            alive = await check(envoy.channel, health, "liveness")
            assert alive.status == health.HealthCheckResponse.SERVING
        scenario(picker(urls), pb, body)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificate")
def test_tls_serves_a_client_that_trusts_the_certificate_only(pb: tuple[Any, ...], tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    with Running(FakeSGLang()) as urls:
        cfg = picker(urls)
        tls = ExtProcConfig(port=cfg.ext_proc.port, tls_cert=str(cert), tls_key=str(key))
        cfg = dataclasses.replace(cfg, ext_proc=tls)

        async def go() -> None:
            async with gateway_at(cfg):
                creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
                secure = grpc.aio.secure_channel(f"localhost:{cfg.ext_proc.port}", creds)
                call, out = await MiniEnvoy(pb, 0, secure).open("POST", "/generate", {}, generate([1]))
                assert out.endpoint == urls[0].removeprefix("http://")
                call.cancel()
                await secure.close()
                plain = grpc.aio.insecure_channel(f"127.0.0.1:{cfg.ext_proc.port}")
                with pytest.raises(grpc.aio.AioRpcError):
                    await MiniEnvoy(pb, 0, plain).open("POST", "/generate", {}, generate([1]))
                await plain.close()
        asyncio.run(asyncio.wait_for(go(), 30))


def test_a_buffered_body_comes_back_whole(pb: tuple[Any, ...]) -> None:
    ext = pb[0]
    with Running(FakeSGLang(dp_size=2)) as urls:
        async def body(envoy: MiniEnvoy, gateway: Any, _: str) -> None:
            modes = ext.ProtocolConfiguration(request_body_mode=2)  # ProcessingMode.BUFFERED
            call = envoy.call_factory()
            await call.write(envoy.headers({":method": "POST", ":path": "/generate"}, protocol_config=modes))
            await call.write(ext.ProcessingRequest(request_body=ext.HttpBody(body=generate([1]),
                                                                              end_of_stream=True)))
            assert (await call.read()).WhichOneof("response") == "request_headers"
            whole = (await call.read()).request_body.response.body_mutation
            assert whole.WhichOneof("mutation") == "body"
            assert json.loads(whole.body)["routed_dp_rank"] in (0, 1)
            call.cancel()
        scenario(picker(urls), pb, body)


def test_the_picker_runs_under_uvloop(pb: tuple[Any, ...]) -> None:
    uvloop = pytest.importorskip("uvloop")
    with Running(FakeSGLang(), FakeSGLang()) as urls:
        cfg = picker(urls)

        async def go() -> None:
            async with gateway_at(cfg):
                envoy = MiniEnvoy(pb, cfg.ext_proc.port)
                for tail in range(3):
                    call, out = await envoy.open("POST", "/generate", {"x-client-id": "a"}, generate([tail]))
                    assert (await envoy.answer(call, out, {})).status == 200
                await envoy.channel.close()
        loop = uvloop.new_event_loop()
        try:
            loop.run_until_complete(asyncio.wait_for(go(), 30))
        finally:
            loop.close()


def test_a_port_in_use_is_a_clear_error() -> None:
    async def go() -> None:
        first = PickerServer(Picker(None), lambda: True)  # type: ignore[arg-type]
        await first.start(ExtProcConfig(port=0))
        taken = ExtProcConfig(port=first.port)
        second = PickerServer(Picker(None), lambda: True)  # type: ignore[arg-type]
        try:
            with pytest.raises(ConfigError, match="cannot listen"):
                await second.start(taken)
        finally:
            await first.stop(0)
    asyncio.run(go())


def test_the_command_serves_both_fronts(pb: tuple[Any, ...]) -> None:
    """``sglang-fair gateway --ext-proc-port P`` as a process (uvicorn's own loop): the HTTP front and
    the picker answer, and /gateway/state counts the picker's decisions."""
    import sys
    import urllib.request

    from sglang_fair.harness.server import free_port

    with Running(FakeSGLang()) as urls:
        http, grpc_port = free_port(), free_port()
        proc = subprocess.Popen([sys.executable, "-m", "sglang_fair", "gateway", "--worker-urls", urls[0],
                                 "--port", str(http), "--ext-proc-port", str(grpc_port)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=1)
                    break
                except OSError:
                    assert proc.poll() is None, proc.communicate()[0]
                    time.sleep(0.05)

            async def go() -> None:
                envoy = MiniEnvoy(pb, grpc_port)
                call, out = await envoy.open("POST", "/generate", {"x-client-id": "a"}, generate([1]))
                assert (await envoy.answer(call, out, {})).status == 200
                await envoy.channel.close()
            asyncio.run(asyncio.wait_for(go(), 20))
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/gateway/state", timeout=5) as resp:
                state = json.load(resp)
            assert state["ext_proc"] == {"picked": 1} and state["workers"][0]["finished"] == 1
        finally:
            proc.terminate()
            proc.wait(10)
