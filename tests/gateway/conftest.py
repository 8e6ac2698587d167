"""Fixtures of the gateway tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def pb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    """The protocol's messages as protoc generates them from the vendored protos (``envoy_client``)."""
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the dev extra)")
    from envoy_client import generated

    return generated(tmp_path_factory.mktemp("generated"))
