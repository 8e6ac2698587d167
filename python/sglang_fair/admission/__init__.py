"""Admission policies, chosen by name: ``fcfs``, ``lpm``, ``vtc``, ``dlpm``, ``dlpm_light``, ``preble``."""

from __future__ import annotations

from sglang_fair.admission.base import (
    AdmissionConfig,
    AdmissionPolicy,
    Budget,
    ClientView,
    WaitingRequest,
    extend_len,
)
from sglang_fair.admission.dlpm import DLPM
from sglang_fair.admission.dlpm_light import DLPMLight
from sglang_fair.admission.fcfs import FCFS
from sglang_fair.admission.lpm import LPM
from sglang_fair.admission.preble import PrebleQueue
from sglang_fair.admission.vtc import VTC
from sglang_fair.core.errors import ConfigError
from sglang_fair.core.registry import Registry

ADMISSION_POLICIES: Registry[AdmissionPolicy] = Registry("admission")
for _cls in (FCFS, LPM, VTC, DLPM, DLPMLight, PrebleQueue):
    ADMISSION_POLICIES.register(_cls.name)(_cls)


def keeps_bands(policy: str) -> bool:
    """Does the admission policy named ``policy`` keep priority bands (``admission/bands.py``)?"""
    return policy in ADMISSION_POLICIES and getattr(ADMISSION_POLICIES.get(policy), "supports_bands", False)


def make_admission_policy(config: AdmissionConfig) -> AdmissionPolicy:
    """Build the admission policy ``config.policy`` (a ConfigError lists the known names, or says
    that the policy keeps no priority bands when ``config.client_bands`` names some)."""
    if config.client_bands and not keeps_bands(config.policy):
        banded = [n for n in ADMISSION_POLICIES.names() if keeps_bands(n)]
        raise ConfigError(f"priority bands need the admission policy {' or '.join(banded)} "
                          f"(got {config.policy})")
    return ADMISSION_POLICIES.create(config.policy, config)


__all__ = [
    "ADMISSION_POLICIES",
    "AdmissionConfig",
    "AdmissionPolicy",
    "Budget",
    "ClientView",
    "WaitingRequest",
    "extend_len",
    "keeps_bands",
    "make_admission_policy",
]
