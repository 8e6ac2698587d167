"""Every SGLang symbol the plugin touches, in one table, and the code that registers the hooks.

:data:`HOOKS` (hooked functions and the parameters each hook needs), :data:`USED_NAMES` (other names
the hooks call or read) and :data:`ATTRIBUTES` (instance attributes read on SGLang's objects) are
checked at run time before anything is hooked (``fence.py``), and by
``tests/sglang/test_plugin_compat.py``.
"""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sglang_fair.sglang_plugin import (
    client_bound,
    controller_hooks,
    http_hooks,
    scheduler_hooks,
    worker_hooks,
)
from sglang_fair.sglang_plugin.config import FAIR_POLICIES
from sglang_fair.sglang_plugin.router_link import KV_EVENTS_PUBLISHER

SGLANG_VERSION = "0.5.23"
SCHEDULE_FIELDS = "sglang.srt.arg_groups.fields.schedule.Schedule"
SERVER_ARGS = "sglang.srt.server_args.ServerArgs"
M = "sglang.srt.managers."
H = "sglang.srt.entrypoints.http_server."
DPC = M + "data_parallel_controller.DataParallelController."
KV_EVENTS = "sglang.srt.disaggregation.kv_events."
URC = "sglang.srt.mem_cache.unified_radix_cache.UnifiedRadixCache."


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
    Hook(M + "scheduler.Scheduler.send_abort_output", "after", scheduler_hooks.abort_output,
         ("self", "abort_req", "req")),
    Hook(M + "scheduler.Scheduler._abort_on_queued_limit", "around", client_bound.abort_on_queued_limit,
         ("self", "recv_req")),
    Hook(M + "scheduler.Scheduler.process_batch_result", "after",
         scheduler_hooks.process_batch_result, ("self", "batch", "result")),
    Hook(H + "launch_server", "before", http_hooks.install_http, ("server_args",)),
    Hook(H + "_wait_and_warmup", "around", http_hooks.wait_and_warmup, ("server_args",)),
    Hook(M + "tokenizer_manager.TokenizerManager.generate_request", "around",
         http_hooks.generate_request, ("self", "obj", "request")),
    Hook(M + "io_struct.GenerateReqInput.__getitem__", "after", http_hooks.batch_item, ("self", "i")),
    Hook(M + "tokenizer_manager.TokenizerManager._validate_one_request", "before",
         http_hooks.validate_request, ("self", "obj", "input_ids")),
    # the radix cache's changes, for incremental matching of the waiting queue (match_index.py)
    Hook(URC + "insert", "after", scheduler_hooks.tree_insert, ("self", "params")),
    Hook(URC + "_evict_device_leaf", "after", scheduler_hooks.tree_node_gone, ("self", "node_id")),
    Hook(URC + "_demote", "after", scheduler_hooks.tree_node_gone, ("self", "node_id")),
    Hook(URC + "_drop_subtree_no_host", "after", scheduler_hooks.tree_changed, ("self", "node_id")),
    Hook(URC + "reset", "after", scheduler_hooks.tree_changed, ("self",)),
    Hook(URC + "load_back", "after", scheduler_hooks.tree_changed, ("self",)),
    # the global router (sglang-fair serve --dp-size N --load-balance-method d2lpm)
    Hook(DPC + "init_dispatcher", "after", controller_hooks.init_dispatcher, ("self",)),
    Hook(M + "scheduler_components.request_receiver.SchedulerRequestReceiver._pull_raw_reqs", "after",
         worker_hooks.pull_raw_reqs, ("self",)),
    Hook(M + "scheduler_components.output_streamer.SchedulerOutputStreamer.stream_output", "after",
         worker_hooks.stream_output, ("self", "reqs")),
    Hook(M + "scheduler.Scheduler.send_abort_output", "after", worker_hooks.send_abort_output,
         ("self", "abort_req", "req")),
)

# Other SGLang names the hooks call or read (checked by the compatibility test too).
USED_NAMES: tuple[str, ...] = (
    "sglang.srt.constants.HEALTH_CHECK_RID_PREFIX",
    "sglang.srt.mem_cache.common.match_kv_cache",
    "sglang.srt.mem_cache.unified_radix_cache.UnifiedRadixCache",
    M + "schedule_policy.AddReqResult",
    M + "schedule_policy.PrefillAdder.add_one_req",
    M + "schedule_policy.PrefillAdder.budget_state",
    M + "schedule_policy.PrefillAdder.__init__",
    "sglang.srt.model_executor.forward_batch_info.ForwardMode.is_extend",
    M + "scheduler.Scheduler.get_num_allocatable_reqs",
    M + "schedule_batch.Req.init_next_round_input",
    M + "schedule_batch.Req.finished",
    M + "schedule_batch.ScheduleBatch.retract_decode",
    M + "scheduler.Scheduler._add_request_to_queue",  # calls _abort_on_queued_limit, releases a refused req
    "sglang.srt.runtime_context.get_parallel",
    "sglang.srt.runtime_context.get_observability",
    H + "app",
    H + "get_global_state",
    "sglang.srt.lora.lora_registry.LoRARegistry.get_all_adapters",
    SCHEDULE_FIELDS,
    SERVER_ARGS,
    M + "io_struct.AbortReq",
    M + "io_struct.msgpack_encode",
    M + "io_struct.msgpack_decode",
    "sglang.srt.environ.envs.SGLANG_USE_PICKLE_IPC",
    M + "io_struct.sock_send",
    DPC + "dispatching_with_trace",
    DPC + "round_robin_scheduler",
    DPC + "maybe_external_dp_rank_routing",
    DPC + "send_control_message",
    "sglang.utils.TypeBasedDispatcher.add_fallback_fn",
    KV_EVENTS + "EventPublisherFactory.register_publisher",
    KV_EVENTS + "BlockStored",
    KV_EVENTS + "BlockRemoved",
    KV_EVENTS + "AllBlocksCleared",
)


# Instance attributes the plugin reads (set in ``__init__``, so only the source or annotations show them).
ATTRIBUTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (M + "schedule_policy.PrefillAdder", ("can_run_list", "running_batch", "rem_chunk_tokens")),
    (M + "schedule_policy.SchedulePolicy", ("policy", "tree_cache")),
    (M + "schedule_batch.ScheduleBatch", ("batch_is_full", "reqs", "launch_ts", "forward_mode",
                                          "extend_num_tokens")),
    (M + "schedule_batch.Req", ("rid", "origin_input_ids", "output_ids", "routing_key", "kv", "prefix_len",
                                "is_retracted", "sampling_params", "priority")),
    ("sglang.srt.sampling.sampling_params.SamplingParams", ("custom_params",)),
    (M + "scheduler.Scheduler", ("waiting_queue", "tree_cache", "policy", "running_batch", "chunked_req",
                                 "is_mixed_chunk", "prefill_decode_interval",
                                 "schedule_low_priority_values_first")),
    (M + "io_struct.GenerateReqInput", ("routing_key", "routed_dp_rank", "sampling_params")),
    (M + "io_struct.TokenizedGenerateReqInput", ("rid", "input_ids", "routing_key")),
    (SERVER_ARGS, ("dp_size", "schedule_policy", "api_key", "enable_priority_scheduling", "pp_size",
                   "tokenizer_worker_num", "grpc_port", "host")),
    (KV_EVENTS + "KVEventBatch", ("events",)),
    (M + "tokenizer_manager.TokenizerManager", ("model_config", "served_model_name", "model_path",
                                                "lora_registry")),
    ("sglang.srt.configs.model_config.ModelConfig", ("vocab_size",)),
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
    """Register :data:`HOOKS` with SGLang's ``HookRegistry`` (``load_plugins`` applies them) and the
    router's eviction feed as a KV-event publisher."""
    from sglang.srt.disaggregation.kv_events import EventPublisherFactory
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    kinds = {"before": HookType.BEFORE, "after": HookType.AFTER, "around": HookType.AROUND}
    for hook in HOOKS:
        HookRegistry.register(hook.target, hook.fn, kinds[hook.kind])
    with contextlib.suppress(KeyError):  # registered by an earlier load_plugins() in this process
        EventPublisherFactory.register_publisher(KV_EVENTS_PUBLISHER, worker_hooks.EvictionPublisher)
