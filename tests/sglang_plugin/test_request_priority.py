"""A request's own SGLang ``priority`` as its band, only where its tenant allows it
(``allow_request_priority``): in the scheduler's state (``state.py``) a banded policy admits an allowed
tenant's urgent request before an earlier one of the standard band and its low-priority request after;
a tenant without the allowance is banded by its tenant whatever priority it sends (negative control:
the same priorities, allowed, reorder admission)."""

from __future__ import annotations

import sys

import pytest
from plugin_support import FakeReq

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.band_names import request_band
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.sglang_plugin.state import FairState
from sglang_fair.sglang_plugin.tenant_reload import allow_request_priority


def test_a_priority_maps_to_a_band_in_sglangs_order() -> None:
    assert [request_band(p) for p in (0, 1, 3, -1, -20)] == [1, 0, 0, 2, 9]  # larger first (SGLang's default)
    assert [request_band(p, low_values_first=True) for p in (0, 1, -1)] == [1, 2, 0]
    for none in (None, "1", True, sys.maxsize, -sys.maxsize - 1):  # SGLang's fill-in when none is given
        assert request_band(none) is None


def first_admitted(allowed: frozenset[str], early: tuple[str, int | None], late: tuple[str, int | None],
                   policy: str = "dlpm_light") -> str:
    """Which of two waiting requests one free slot admits (``early`` arrived first)."""
    state = FairState(make_admission_policy(AdmissionConfig(policy, quantum=100.0)))
    allow_request_priority(state, allowed)
    reqs = []
    for rid, (client, priority) in enumerate((early, late)):
        req = FakeReq(str(rid), client, [rid + 1] * 20)
        req.priority = priority  # type: ignore[attr-defined]
        state.arrive(req)
        reqs.append(req)
    (admitted,) = state.select(reqs, SlotBudget(1))
    return str(admitted.routing_key)


@pytest.mark.parametrize("policy", ["dlpm", "dlpm_light"])
def test_an_allowed_tenants_priority_orders_admission_and_another_tenants_is_ignored(policy: str) -> None:
    vip = frozenset({"vip"})
    assert first_admitted(vip, ("std", None), ("vip", 2), policy) == "vip"  # band 0 before band 1
    assert first_admitted(vip, ("vip", -1), ("std", None), policy) == "std"  # band 2 after band 1
    # not allowed: the same priorities are ignored; the tenant's own band (standard) decides
    assert first_admitted(frozenset(), ("std", None), ("vip", 2), policy) == "std"
    assert first_admitted(frozenset(), ("vip", -1), ("std", None), policy) == "vip"
    assert first_admitted(vip, ("vip", None), ("std", 5), policy) == "vip"  # std's priority: ignored


def test_a_policy_without_bands_takes_no_request_priority() -> None:
    state = FairState(make_admission_policy(AdmissionConfig("vtc", quantum=100.0)))
    allow_request_priority(state, frozenset({"vip"}))
    assert state.priority_clients == frozenset()
