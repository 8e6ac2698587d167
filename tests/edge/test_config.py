"""The edge's flags are declared once (``EdgeConfig``): ``serve`` and ``gateway`` take the same ones, build
the same config from them, and merge the key file's weights with ``--client-weights`` one way."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sglang_fair.cli import build_parser
from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.config import EdgeConfig, edge_config
from sglang_fair.gateway.config import gateway_config
from sglang_fair.sglang_plugin.config import build_config


def edge_flags(tmp_path: Path) -> list[str]:
    (tmp_path / "keys").write_text("k-a alice 2\nk-b bob\n")
    (tmp_path / "token").write_text("t" * 20 + "\n")
    return ["--client-keys", str(tmp_path / "keys"), "--client-header", "X-Tenant", "--client-ttl", "30",
            "--client-max-inflight", "4", "--max-body-bytes", "1000", "--gateway-token-file",
            str(tmp_path / "token"), "--accept-any-model", "--fairness-admins", "bob",
            "--metrics-top-tenants", "7"]


def test_serve_and_the_gateway_build_the_same_edge_from_the_same_flags(tmp_path: Path) -> None:
    flags = edge_flags(tmp_path)
    served = build_config(vars(build_parser().parse_args(["serve", *flags])))
    gateway = gateway_config(build_parser().parse_args(["gateway", "--worker-urls", "http://s:1", *flags]))
    assert served.edge == gateway.edge
    assert gateway.edge.key_table.clients == {"k-a": "alice", "k-b": "bob"}
    assert gateway.edge.gateway_token.enabled
    assert (gateway.edge.client_header, gateway.edge.client_max_inflight, gateway.edge.max_body_bytes,
            gateway.edge.accept_any_model, gateway.edge.admins()) == ("X-Tenant", 4, 1000, True, {"bob"})
    assert gateway.edge.metrics_top_tenants == 7
    assert gateway.edge.idle_ttl() == 0.0  # keys bound the clients: nothing expires
    every = {f.name for f in dataclasses.fields(EdgeConfig)} - {"key_table", "gateway_token"}
    assert {n for n in every if f"--{n.replace('_', '-')}" in flags} == every  # the flags cover the edge


def test_one_weight_merge_for_both(tmp_path: Path) -> None:
    flags = edge_flags(tmp_path)
    served = build_config(vars(build_parser().parse_args(["serve", *flags, "--client-weights", "carol=3"])))
    gateway = gateway_config(build_parser().parse_args(["gateway", "--worker-urls", "http://s:1", *flags,
                                                         "--client-weights", "carol=3"]))
    assert served.cost().client_weights == gateway.cost().client_weights == {"alice": 2.0, "carol": 3.0}
    for command in (["serve"], ["gateway", "--worker-urls", "http://s:1"]):
        args = build_parser().parse_args([*command, *flags, "--client-weights", "alice=3"])
        with pytest.raises(ConfigError, match=r"conflicts with weight 2\.0 in --client-keys"):
            build_config(vars(args)) if command == ["serve"] else gateway_config(args)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("client_header", " ", "--client-header must not be empty"),
    ("client_ttl", -1.0, "--client-ttl must be >= 0"),
    ("client_max_inflight", -1, "--client-max-inflight must be >= 0"),
    ("max_body_bytes", -1, "--max-body-bytes must be >= 0"),
    ("fairness_admins", "ops", "--fairness-admins needs --client-keys"),
])
def test_bad_edge_values_are_refused_once_for_both(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EdgeConfig(**{field: value})  # type: ignore[arg-type]


def test_unreadable_files_name_their_flag(tmp_path: Path) -> None:
    args = build_parser().parse_args(["serve", "--gateway-token-file", str(tmp_path / "none")])
    with pytest.raises(ConfigError, match=r"--gateway-token-file .*none: cannot read"):
        edge_config(args)
