"""Every SGLang symbol the plugin touches, in one table, and the code that registers the hooks.

The compatibility test (``tests/sglang/test_compat.py``) walks :data:`HOOKS` and fails, naming the
symbol, when a target or one of the parameters a hook relies on is missing from the pinned SGLang.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sglang_fair.sglang_plugin import http_hooks, scheduler_hooks
from sglang_fair.sglang_plugin.config import FAIR_POLICIES

SGLANG_VERSION = "0.5.23"
SCHEDULE_FIELDS = "sglang.srt.arg_groups.fields.schedule.Schedule"
SERVER_ARGS = "sglang.srt.server_args.ServerArgs"
M = "sglang.srt.managers."
H = "sglang.srt.entrypoints.http_server."


@dataclass(frozen=True)
class Hook:
    """One hook: target path, kind (``before``/``after``/``around``), function, parameters it needs."""

    target: str
    kind: str
    fn: Callable[..., Any]
    params: tuple[str, ...]


HOOKS: tuple[Hook, ...] = (
    Hook(M + "schedule_policy.SchedulePolicy._validate_and_adjust_policy", "around",
         scheduler_hooks.validate_policy, ("self", "policy", "tree_cache")),
    Hook(M + "schedule_policy.SchedulePolicy.calc_priority", "around",
         scheduler_hooks.calc_priority, ("self", "waiting_queue")),
    Hook(M + "scheduler.Scheduler.get_prefill_adder_class", "around",
         scheduler_hooks.prefill_adder_class, ("self",)),
    Hook(M + "scheduler.Scheduler._add_request_to_queue", "after",
         scheduler_hooks.add_request_to_queue, ("self", "req")),
    Hook(M + "scheduler.Scheduler.process_batch_result", "after",
         scheduler_hooks.process_batch_result, ("self", "batch", "result")),
    Hook(H + "launch_server", "before", http_hooks.install_http, ("server_args",)),
    Hook(H + "_wait_and_warmup", "around", http_hooks.wait_and_warmup, ("server_args",)),
    Hook(M + "tokenizer_manager.TokenizerManager.generate_request", "around",
         http_hooks.generate_request, ("self", "obj", "request")),
    Hook(M + "io_struct.GenerateReqInput.__getitem__", "after", http_hooks.batch_item, ("self", "i")),
)

# Other SGLang names the hooks call or read (checked by the compatibility test too).
USED_NAMES: tuple[str, ...] = (
    "sglang.srt.mem_cache.common.match_kv_cache",
    M + "schedule_policy.AddReqResult",
    M + "schedule_policy.PrefillAdder.add_one_req",
    M + "schedule_policy.PrefillAdder.budget_state",
    M + "scheduler.Scheduler.get_num_allocatable_reqs",
    M + "schedule_batch.Req.init_next_round_input",
    M + "schedule_batch.Req.finished",
    "sglang.srt.runtime_context.get_parallel",
    "sglang.srt.runtime_context.get_observability",
    H + "app",
    SCHEDULE_FIELDS,
    SERVER_ARGS,
)


def extend_schedule_policy_choices(names: tuple[str, ...] = FAIR_POLICIES) -> list[str]:
    """Add ``names`` to ``--schedule-policy``'s choices, before SGLang parses its arguments.

    The choice list lives in the ``Schedule`` namespace's annotation and, once
    ``sglang.srt.server_args`` is imported, in ``ServerArgs``'s flattened annotation too; both get
    an ``Arg`` with the longer list.
    """
    import msgspec
    from sglang.srt import server_args
    from sglang.srt.arg_groups.fields.schedule import Schedule

    choices: list[str] = []
    for cls in (Schedule, server_args.ServerArgs):
        raw = cls.__annotations__["schedule_policy"]
        hint = raw
        if isinstance(raw, str):
            hint = typing.get_type_hints(cls, include_extras=True)["schedule_policy"]
        arg = hint.__metadata__[0]
        choices = list(arg.choices) + [n for n in names if n not in arg.choices]
        cls.__annotations__["schedule_policy"] = typing.Annotated[
            hint.__origin__, msgspec.structs.replace(arg, choices=choices)
        ]
    return choices


def register_hooks() -> None:
    """Register :data:`HOOKS` with SGLang's ``HookRegistry`` (``load_plugins`` applies them)."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    kinds = {"before": HookType.BEFORE, "after": HookType.AFTER, "around": HookType.AROUND}
    for hook in HOOKS:
        HookRegistry.register(hook.target, hook.fn, kinds[hook.kind])
