"""Shared pieces of the policy core: service cost, request views, radix trees, registries."""

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.core.registry import Registry

__all__ = ["ConfigError", "CostModel", "Registry"]
