"""What ``sglang-fair serve`` runs when the user chooses no policy: the fair pair.

With no ``--schedule-policy`` the schedulers run ``dlpm_light`` (DLPM whose defaults protect a client
that sends one request at a time from a flood; ``fcfs`` or ``lpm`` gives back plain SGLang); with
``--dp-size N >= 2`` and no ``--load-balance-method`` the global router runs ``fair_cache_aware``
(SGLang's cache-aware routing with per-client credit placing new work). A user who chose no policy but
turned on an SGLang feature the fair policies do not serve (LoRA, pipeline parallelism,
disaggregation, ...) gets SGLang's own default and one notice saying why; a fair policy chosen
explicitly with such a feature stays an error (``launcher.check_combination``).

SGLang's ``--enable-priority-scheduling`` keeps the fair default (it once turned it back to ``fcfs``:
SGLang 0.5.23 accepts the flag only with ``fcfs`` or ``lof``): with a fair policy the flag is taken off
SGLang's arguments, with a notice, and the fair policy orders admission itself (a request's
``priority`` reaches the scheduler without the flag and is its band for a tenant with
``allow_request_priority``, docs/guides/tenants.md); SGLang's priority sort and its priority preemption, which
would evict running requests past the policy, do not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sglang_fair.sglang_plugin.config import FAIR_POLICIES
from sglang_fair.sglang_plugin.router_launch import (
    KV_FLAG,
    LB_FLAG,
    ROUTER_OFF,
    Feature,
    find_flag,
    flag_value,
    router_unsupported,
)

POLICY_FLAG = "--schedule-policy"
PRIORITY_FLAG = "--enable-priority-scheduling"
DEFAULT_ADMISSION = "dlpm_light"
DEFAULT_ROUTER = "fair_cache_aware"


ADMISSION_OFF = (
    Feature("--enable-lora / --lora-paths", lambda a: bool(getattr(a, "enable_lora", None)
                                                           or getattr(a, "lora_paths", None))),
    Feature("--pp-size > 1", lambda a: (getattr(a, "pp_size", 1) or 1) > 1, "pipeline parallelism"),
    Feature("--disaggregation-mode", lambda a: getattr(a, "disaggregation_mode", "null") != "null",
            "prefill/decode disaggregation"),
    Feature("--hicache-storage-backend", lambda a: bool(getattr(a, "hicache_storage_backend", None))),
    Feature("--dllm-algorithm", lambda a: bool(getattr(a, "dllm_algorithm", None)), "diffusion LMs"),
)
KV_FEATURE = Feature(KV_FLAG, lambda a: False, "the router takes SGLang's KV events for itself")


def fair_unsupported(server_args: Any) -> list[str]:
    """The SGLang features on in ``server_args`` that the fair admission policies cannot serve with."""
    return [f.text() for f in ADMISSION_OFF if f.on(server_args)]


def defaults_summary(markdown: bool = False) -> str:
    """What ``serve`` runs when the user chooses no policy, and every feature that turns a default back
    to SGLang's own: the one list that ``serve --help``, README.md and docs/guides/serve.md give."""
    def listed(features: Sequence[Feature]) -> str:
        return ", ".join(f.text(markdown) for f in features)

    code = (lambda s: f"`{s}`") if markdown else (lambda s: s)
    return (f"With no {code(POLICY_FLAG)} the schedulers run {code(DEFAULT_ADMISSION)}, except with "
            f"{listed(ADMISSION_OFF)}: then SGLang's default ({code('fcfs')}). With {code('--dp-size N')} "
            f"(N >= 2) and no {code(LB_FLAG)} the global router runs {code(DEFAULT_ROUTER)}, except with "
            f"{listed([*ROUTER_OFF, KV_FEATURE])}: then SGLang's own {code(LB_FLAG)}. Each exception "
            "prints a one-line notice; a fair policy chosen explicitly with one of them is an error.")


def with_defaults(args: Sequence[str], server_args: Any) -> tuple[list[str], list[str]]:
    """``args`` with the fair defaults added where the user chose nothing, and the notices to print
    where a default could not apply. ``server_args`` is SGLang's parse of ``args`` as given."""
    out, notices = list(args), []
    if find_flag(args, POLICY_FLAG) is None:
        if bad := fair_unsupported(server_args):
            notices.append(f"sglang-fair: {', '.join(bad)} is not supported by the fair admission policies: "
                           f"the schedulers run SGLang's default {POLICY_FLAG} "
                           f"{getattr(server_args, 'schedule_policy', 'fcfs')}")
        else:
            out += [POLICY_FLAG, DEFAULT_ADMISSION]
    policy = flag_value(out, POLICY_FLAG)
    if policy in FAIR_POLICIES and getattr(server_args, "enable_priority_scheduling", False):
        out = [a for a in out if a != PRIORITY_FLAG]
        notices.append(f"sglang-fair: {PRIORITY_FLAG} with {POLICY_FLAG} {policy}: the fair policy orders "
                       f"admission itself (a request's priority is its band where its tenant allows it, "
                       f"docs/guides/tenants.md); SGLang's priority sort and preemption do not run")
    if find_flag(args, LB_FLAG) is None and (getattr(server_args, "dp_size", 1) or 1) >= 2:
        bad = router_unsupported(server_args)
        if find_flag(args, KV_FLAG) is not None:
            bad.append(KV_FEATURE.text())
        if bad:
            notices.append(f"sglang-fair: {', '.join(bad)} is not supported by the global router: "
                           f"SGLang's own {LB_FLAG} routes between the data-parallel workers")
        else:
            out += [LB_FLAG, DEFAULT_ROUTER]
    return out, notices
