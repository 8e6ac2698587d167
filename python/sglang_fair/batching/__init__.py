"""Batch-formation policies, chosen by name: ``sglang``, ``sarathi``, ``fairbatching``, ``slai``."""

from __future__ import annotations

from sglang_fair.batching.base import (
    BatchingConfig,
    BatchingPolicy,
    BatchPlan,
    DecodeView,
    PrefillView,
    StepView,
    check_plan,
)
from sglang_fair.batching.fairbatching import FairBatching
from sglang_fair.batching.simple import Sarathi, SGLangDefault
from sglang_fair.batching.slai import SLAI
from sglang_fair.batching.slo import SLO, SLOTable
from sglang_fair.core.registry import Registry

BATCHING_POLICIES: Registry[BatchingPolicy] = Registry("batching")
for _cls in (SGLangDefault, Sarathi, FairBatching, SLAI):
    BATCHING_POLICIES.register(_cls.name)(_cls)


def make_batching_policy(config: BatchingConfig) -> BatchingPolicy:
    """Build the batching policy ``config.policy`` (a ConfigError lists the known names)."""
    return BATCHING_POLICIES.create(config.policy, config)


__all__ = [
    "BATCHING_POLICIES",
    "SLO",
    "BatchPlan",
    "BatchingConfig",
    "BatchingPolicy",
    "DecodeView",
    "PrefillView",
    "SLOTable",
    "StepView",
    "check_plan",
    "make_batching_policy",
]
