"""Per-request SLOs on the HTTP endpoints (``request_slo.py``): the body field is validated, carried
in SGLang's sampling parameters to the scheduler, and read there ahead of the client's class."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from sglang_fair.batching import SLO, SLOTable
from sglang_fair.sglang_plugin import http_hooks
from sglang_fair.sglang_plugin.request_slo import PARAM_KEY, carry, parse_slo, slo_of, with_request_slo

TABLE = SLOTable(SLO(2.0, 0.05), {"paying": SLO(0.5, 0.02)}, {"alice": "paying"})


def test_valid_fields_parse_and_either_target_may_be_left_out() -> None:
    assert parse_slo({"slo": {"ttft": 1, "tpot": 0.1}}) == [1.0, 0.1]
    assert parse_slo({"slo": {"tpot": 0.1}}) == [None, 0.1]
    assert parse_slo({"prompt": "x"}) is None and parse_slo(None) is None and parse_slo({"slo": None}) is None


@pytest.mark.parametrize("slo", [{}, [], "fast", {"ttft": 0}, {"ttft": -1}, {"tpot": float("inf")},
                                 {"tpot": float("nan")}, {"ttft": True}, {"ttft": "1"}, {"ttbt": 1}])
def test_bad_fields_are_refused_with_the_reason(slo: Any) -> None:
    with pytest.raises(ValueError, match='"slo'):
        parse_slo({"slo": slo})


def req(client: str, custom: Any) -> SimpleNamespace:
    return SimpleNamespace(routing_key=client, sampling_params=SimpleNamespace(custom_params=custom))


def test_the_scheduler_reads_the_request_targets_ahead_of_the_class() -> None:
    assert slo_of(req("bob", None), TABLE) == SLO(2.0, 0.05)
    assert slo_of(req("alice", {}), TABLE) == SLO(0.5, 0.02)  # negative control: the class applies
    assert slo_of(req("alice", {PARAM_KEY: [None, 0.2]}), TABLE) == SLO(0.5, 0.2)
    assert slo_of(req("bob", {PARAM_KEY: [1.0, 0.01]}), TABLE) == SLO(1.0, 0.01)
    assert slo_of(req("bob", {PARAM_KEY: [-1.0, 0.01]}), TABLE) == SLO(2.0, 0.05)  # malformed: ignored


def test_carry_sets_every_sampling_dict_and_drops_a_forged_value() -> None:
    batch = SimpleNamespace(sampling_params=[{"temperature": 0}, {"custom_params": {"k": 1}}])
    carry(batch, [0.5, None])
    assert [p["custom_params"][PARAM_KEY] for p in batch.sampling_params] == [[0.5, None]] * 2
    assert batch.sampling_params[1]["custom_params"]["k"] == 1
    forged = SimpleNamespace(sampling_params={"custom_params": {PARAM_KEY: [1e-9, 1e-9]}})
    carry(forged, None)
    assert forged.sampling_params["custom_params"] is None
    empty = SimpleNamespace(sampling_params=None)
    carry(empty, [None, 0.1])
    assert empty.sampling_params == {"custom_params": {PARAM_KEY: [None, 0.1]}}


class Request:
    def __init__(self, body: Any) -> None:
        self.body = body

    async def json(self) -> Any:
        return self.body


def run(body: Any, obj: Any) -> list[Any]:
    async def original(self: Any, o: Any, request: Any) -> AsyncIterator[Any]:
        yield dict(o.sampling_params or {})  # what SGLang's generate_request sees

    async def drain() -> list[Any]:
        gen = http_hooks.generate_request(original, None, obj, Request(body))
        return [x async for x in gen]

    return asyncio.run(drain())


def test_the_generate_hook_carries_the_body_field_before_sglang_starts() -> None:
    obj = SimpleNamespace(sampling_params={"max_new_tokens": 4}, routed_dp_rank=None)
    (seen,) = run({"text": "x", "slo": {"ttft": 0.3}}, obj)
    assert seen["custom_params"] == {PARAM_KEY: [0.3, None]}
    with pytest.raises(ValueError, match=r"slo\.tpot"):
        run({"slo": {"tpot": 0}}, SimpleNamespace(sampling_params={}, routed_dp_rank=None))


def test_an_aborted_stream_closes_sglangs_generator() -> None:
    closed: list[bool] = []

    async def gen() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            closed.append(True)

    async def first() -> int:
        wrapped = with_request_slo(gen(), SimpleNamespace(sampling_params={}), Request({}))
        value = await wrapped.__anext__()
        await wrapped.aclose()
        return value

    assert asyncio.run(first()) == 1 and closed == [True]
