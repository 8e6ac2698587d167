"""The fairness bound the page states next to the measured gap, from the policies' theorems.

Clients backlogged over an interval receive service (per unit of weight) within:

- DLPM and ``dlpm_light`` on one worker: 2 (U + Q^u), U = w_e L_input + w_q M ([1] Thm 4.1);
- VTC on one worker: 2 max(w_e L_input, w_q M) ([2] Thm 4.4);
- across |W| workers routed by D²LPM or ``fair_cache_aware`` (each worker running DLPM):
  2 |W| (U + Q^u) ([1] Thm 5.1, for clients backlogged at every worker).

L_input and M (the longest prompt and output) are both taken as the context length, which bounds
either. Other policies state no bound; the page then shows the gap alone.
"""

from __future__ import annotations

from typing import Any

from sglang_fair.admission import ADMISSION_POLICIES

DEFICIT = ("dlpm", "dlpm_light")
VIRTUAL = ("vtc",)
FAIR_ROUTERS = ("d2lpm", "d2lpm_guarded", "fair_cache_aware")


def quantum_of(policy: str, quantum: float, quantum_s: float = 0.0) -> float | None:
    """Q^u in units as the policy runs it (``quantum``; 0: the policy's default); None for a quantum in
    time (``quantum_s`` or the policy's default seconds), which only the worker's measured service
    turns into units (the schedulers publish it)."""
    if quantum > 0 or policy not in ADMISSION_POLICIES.names():
        return quantum
    cls = ADMISSION_POLICIES.get(policy)
    if quantum_s > 0 or getattr(cls, "default_quantum_s", 0.0) > 0:
        return None
    return float(getattr(cls, "default_quantum", 0.0))


def stated_bound(policy: str | None, quantum: float | None, w_e: float, w_q: float, context_len: int | None,
                 workers: int = 1, router: str | None = None) -> dict[str, Any]:
    """``{"value", "formula", "source"}``: the bound on the gap (None where no theorem gives one)."""
    none = {"value": None, "formula": f"no stated bound for policy {policy or 'none'}", "source": None}
    if policy not in DEFICIT + VIRTUAL or not context_len:
        if policy in DEFICIT + VIRTUAL:
            none["formula"] = "the context length is not known yet"
        return none
    length = float(context_len)
    if policy in VIRTUAL:
        if workers > 1:
            return {**none, "formula": f"no stated bound for VTC across {workers} workers"}
        value = 2 * max(w_e * length, w_q * length)
        return {"value": round(value, 1), "source": "[2] Thm 4.4",
                "formula": f"2 max(w_e L, w_q L) = 2 max({w_e:g}x{context_len}, {w_q:g}x{context_len})"}
    q_u = quantum_of(policy, quantum) if quantum is not None else None
    if q_u is None:
        return {**none, "formula": "Q^u is a quantum in time: not measured by the workers yet"}
    per_worker = 2 * (w_e * length + w_q * length + q_u)
    formula = f"2 (U + Q^u), U = ({w_e:g} + {w_q:g}) x {context_len}, Q^u = {q_u:g}"
    if workers == 1:
        return {"value": round(per_worker, 1), "source": "[1] Thm 4.1", "formula": formula}
    if router not in FAIR_ROUTERS:
        return {**none, "formula": f"no stated bound across {workers} workers under router {router}"}
    return {"value": round(workers * per_worker, 1), "source": "[1] Thm 5.1",
            "formula": f"2 |W| (U + Q^u), |W| = {workers}, U = ({w_e:g} + {w_q:g}) x {context_len}, "
                       f"Q^u = {q_u:g} (clients backlogged at every worker)"}
