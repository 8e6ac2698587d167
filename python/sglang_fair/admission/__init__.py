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
from sglang_fair.core.registry import Registry

ADMISSION_POLICIES: Registry[AdmissionPolicy] = Registry("admission")
for _cls in (FCFS, LPM, VTC, DLPM, DLPMLight, PrebleQueue):
    ADMISSION_POLICIES.register(_cls.name)(_cls)


def make_admission_policy(config: AdmissionConfig) -> AdmissionPolicy:
    """Build the admission policy ``config.policy`` (a ConfigError lists the known names)."""
    return ADMISSION_POLICIES.create(config.policy, config)


__all__ = [
    "ADMISSION_POLICIES",
    "AdmissionConfig",
    "AdmissionPolicy",
    "Budget",
    "ClientView",
    "WaitingRequest",
    "extend_len",
    "make_admission_policy",
]
