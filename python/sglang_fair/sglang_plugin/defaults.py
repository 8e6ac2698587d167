"""What ``sglang-fair serve`` runs when the user chooses no policy: the fair pair.

With no ``--schedule-policy`` the schedulers run ``dlpm_light`` (DLPM whose defaults protect a client
that sends one request at a time from a flood; ``fcfs`` or ``lpm`` gives back plain SGLang); with
``--dp-size N >= 2`` and no ``--load-balance-method`` the global router runs ``fair_cache_aware``
(SGLang's cache-aware routing with per-client credit placing new work). A user who chose no policy but
turned on an SGLang feature the fair policies do not serve (LoRA, pipeline parallelism,
disaggregation, priority scheduling, ...) gets SGLang's own default and one notice saying why; a fair
policy chosen explicitly with such a feature stays an error (``launcher.check_combination``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sglang_fair.sglang_plugin.router_launch import KV_FLAG, LB_FLAG, find_flag, router_unsupported

POLICY_FLAG = "--schedule-policy"
DEFAULT_ADMISSION = "dlpm_light"
DEFAULT_ROUTER = "fair_cache_aware"


def fair_unsupported(server_args: Any) -> list[str]:
    """The SGLang features on in ``server_args`` that the fair admission policies cannot serve with."""
    features = {
        "--enable-priority-scheduling": getattr(server_args, "enable_priority_scheduling", False),
        "--enable-lora / --lora-paths": bool(getattr(server_args, "enable_lora", None)
                                             or getattr(server_args, "lora_paths", None)),
        "--pp-size > 1": (getattr(server_args, "pp_size", 1) or 1) > 1,
        "--disaggregation-mode": getattr(server_args, "disaggregation_mode", "null") != "null",
        "--hicache-storage-backend": bool(getattr(server_args, "hicache_storage_backend", None)),
        "--dllm-algorithm": bool(getattr(server_args, "dllm_algorithm", None)),
    }
    return [name for name, on in features.items() if on]


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
    if find_flag(args, LB_FLAG) is None and (getattr(server_args, "dp_size", 1) or 1) >= 2:
        bad = router_unsupported(server_args)
        if find_flag(args, KV_FLAG) is not None:
            bad.append(f"{KV_FLAG} (the router takes SGLang's KV events for itself)")
        if bad:
            notices.append(f"sglang-fair: {', '.join(bad)} is not supported by the global router: "
                           f"SGLang's own {LB_FLAG} routes between the data-parallel workers")
        else:
            out += [LB_FLAG, DEFAULT_ROUTER]
    return out, notices
