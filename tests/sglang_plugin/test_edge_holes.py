"""The known holes of the serving edge, each shown on the plugin's code and closed.

Identity: more tokenizer workers and the gRPC server are refused; websockets are checked; a body's
``routed_dp_rank`` cannot pass the router; ``/fairness`` and ``/metrics`` need a key when keys are
configured; SGLang's warm-up from the server's own ``--host`` address gets through. Accounting: a
request ``retract_decode`` aborts (``to_finish`` set, ``finished_reason`` never) leaves the state.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import MutableMapping
from types import SimpleNamespace
from typing import Any

import pytest
from plugin_support import FakeReq, sglang_args

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.admins import AdminOnlyMiddleware
from sglang_fair.edge.config import EdgeConfig
from sglang_fair.edge.identity import ClientIdentityMiddleware, resolve_hosts
from sglang_fair.edge.inflight import ClientInflightMiddleware
from sglang_fair.edge.keys import parse_key_lines
from sglang_fair.sglang_plugin import http_hooks, scheduler_hooks
from sglang_fair.sglang_plugin.config import FairConfig, build_config
from sglang_fair.sglang_plugin.router_link import ENV_ROUTER
from sglang_fair.sglang_plugin.state import FairState

Refused = dict[str, subprocess.CompletedProcess[str]]
KEYS = parse_key_lines(["k-alice alice", "k-bob bob", "k-ops ops"])
WITH_KEYS = FairConfig(edge=EdgeConfig(key_table=KEYS, fairness_admins="ops"))
Sent = list[MutableMapping[str, Any]]


# ---- refused at start-up ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("server", "message"),
    [
        (sglang_args("dlpm", tokenizer_worker_num=2), "--tokenizer-worker-num > 1"),
        (sglang_args("vtc", grpc_port=30001), "--grpc-port"),
        (sglang_args("lpm", grpc_port=30001), "--grpc-port"),  # with keys (below) or the router
    ],
)
def test_unguarded_entrances_are_refused(server: SimpleNamespace, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        http_hooks.check_edge(server, WITH_KEYS, router=False)
    http_hooks.check_edge(sglang_args("lpm", tokenizer_worker_num=2, grpc_port=1), FairConfig(), False)
    with pytest.raises(ConfigError):
        http_hooks.check_edge(sglang_args("lpm", tokenizer_worker_num=2), FairConfig(), router=True)


@pytest.mark.sglang
def test_unguarded_entrances_exit_2_after_sglang_parses(refused_after_parse: Refused) -> None:
    done = refused_after_parse["unguarded entrances"]
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--tokenizer-worker-num > 1" in done.stderr and "--grpc-port" in done.stderr


def test_fairness_admins_need_keys_and_known_clients() -> None:
    with pytest.raises(ConfigError, match="needs --client-keys"):
        build_config({"fairness_admins": "ops"})
    with pytest.raises(ConfigError, match="without a key in --client-keys: nobody"):
        EdgeConfig(key_table=KEYS, fairness_admins="ops,nobody")


# ---- the middleware -----------------------------------------------------------------------------------
def middleware(config: FairConfig, warmup: bool = False,
               local: frozenset[str] = frozenset()) -> tuple[ClientIdentityMiddleware, dict[str, Any]]:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["client"] = (scope.get("state") or {}).get("sglang_fair_client")

    inner = AdminOnlyMiddleware(app, config.admins()) if config.edge.key_table.enabled else app
    return ClientIdentityMiddleware(inner, config.edge.key_table, "X-Client-Id", lambda: warmup, local), seen


def call(mw: ClientIdentityMiddleware, path: str, headers: dict[str, str] | None = None,
         kind: str = "http", host: str = "10.0.0.1") -> Sent:
    sent: Sent = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {"type": kind, "path": path, "method": "POST" if kind == "http" else "GET",
             "client": (host, 5), "headers": raw}
    asyncio.run(mw(scope, receive, send))
    return sent


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_websocket_needs_a_key_like_http() -> None:
    mw, seen = middleware(WITH_KEYS)
    assert call(mw, "/v1/realtime", kind="websocket") == [
        {"type": "websocket.close", "code": 1008, "reason": "missing or unknown API key"}]
    assert not seen
    assert call(mw, "/v1/realtime", bearer("k-bob"), kind="websocket") == []
    assert seen["client"] == "bob"


def test_client_listings_need_a_key_when_keys_are_configured() -> None:
    mw, seen = middleware(WITH_KEYS)
    for path in ("/fairness", "/metrics"):
        sent = call(mw, path)
        assert sent[0]["status"] == 401
        assert json.loads(sent[1]["body"])["type"] == "Unauthorized"
    assert call(mw, "/metrics", bearer("k-alice"))[0]["status"] == 403
    assert call(mw, "/metrics", bearer("k-ops")) == [] and seen["client"] == "ops"
    assert call(mw, "/fairness", bearer("k-alice")) == [] and seen["client"] == "alice"
    assert call(mw, "/health") == []  # still open
    open_mw, _ = middleware(FairConfig())
    assert call(open_mw, "/fairness") == [] and call(open_mw, "/metrics") == []


def test_fairness_view_shows_a_key_its_own_row_and_an_admin_everything() -> None:
    everything = {"policy": "dlpm", "clients": {"alice": {"service": 1.0}, "bob": {"service": 2.0}}}
    assert http_hooks.fairness_view(everything, "alice", WITH_KEYS)["clients"] == {"alice": {"service": 1.0}}
    assert http_hooks.fairness_view(everything, "ops", WITH_KEYS) == everything
    assert http_hooks.fairness_view(everything, "carol", WITH_KEYS)["clients"] == {}
    assert http_hooks.fairness_view(everything, None, FairConfig()) == everything


def test_warmup_from_the_servers_own_host_address_gets_through() -> None:
    local = resolve_hosts("192.0.2.7")
    assert local == frozenset({"192.0.2.7"}) and resolve_hosts("0.0.0.0") == frozenset()
    mw, seen = middleware(WITH_KEYS, warmup=True, local=local)
    assert call(mw, "/model_info", host="192.0.2.7") == [] and seen["client"] == "__warmup__"
    assert call(mw, "/generate", host="192.0.2.8")[0]["status"] == 401  # anyone else: no
    closed, _ = middleware(WITH_KEYS, warmup=False, local=local)
    assert call(closed, "/generate", host="192.0.2.7")[0]["status"] == 401  # after the warm-up: no
    before_fix, _ = middleware(WITH_KEYS, warmup=True)
    assert call(before_fix, "/model_info", host="192.0.2.7")[0]["status"] == 401  # the hole


# ---- the tokenizer manager hook (SGLang's own request class) ------------------------------------------
@pytest.mark.sglang
def test_routed_dp_rank_cannot_bypass_the_router(monkeypatch: pytest.MonkeyPatch) -> None:
    from sglang.srt.managers.io_struct import GenerateReqInput

    request = SimpleNamespace(scope={"state": {"sglang_fair_client": "alice"}})

    def original(self: Any, obj: Any, request: Any) -> str:
        return "sent"

    obj = GenerateReqInput(text="a", routed_dp_rank=1, routing_key="bob")
    assert http_hooks.generate_request(original, None, obj, request) == "sent"  # no router: SGLang's DP
    assert obj.routing_key == "alice"
    monkeypatch.setenv(ENV_ROUTER, json.dumps({"directory": "/tmp/x", "num_workers": 2}))
    with pytest.raises(ValueError, match="routed_dp_rank is not accepted"):
        http_hooks.generate_request(original, None, GenerateReqInput(text="a", routed_dp_rank=1), request)
    internal = GenerateReqInput(text="a", routed_dp_rank=1)  # SGLang's own calls carry no HTTP request
    assert http_hooks.generate_request(original, None, internal, None) == "sent"
    grpc_like = SimpleNamespace()  # a gRPC request object has no .scope
    assert http_hooks.generate_request(original, None, GenerateReqInput(text="a"), grpc_like) == "sent"


# ---- accounting: retract_decode's aborts ------------------------------------------------------------
def fair_state() -> FairState:
    config = AdmissionConfig(policy="dlpm", quantum=1000.0, cost=CostModel(w_e=1.0, w_q=2.0))
    return FairState(make_admission_policy(config))


@pytest.mark.sglang
def test_request_aborted_in_retract_decode_leaves_the_state() -> None:
    from sglang.srt.managers.schedule_batch import FINISH_ABORT, Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    state = fair_state()
    req = Req("r1", "hi", [1, 2, 3, 4], SamplingParams(max_new_tokens=8), routing_key="alice")
    state.arrive(req)
    assert state.select([req], SlotBudget(1)) == [req]
    req.output_ids.extend([5, 6])
    req.to_finish = FINISH_ABORT("Out of memory even after retracting all other requests")  # as SGLang does
    state.after_step()
    assert not req.finished() and "r1" in state.running  # the hole: never retired by after_step
    scheduler = SimpleNamespace(policy=SimpleNamespace(**{scheduler_hooks.STATE_ATTR: state}))
    scheduler_hooks.abort_output(None, scheduler, None, req)  # AFTER Scheduler.send_abort_output
    snap = state.snapshot()["alice"]
    assert not state.running and (snap["running"], snap["waiting"]) == (0, 0)
    assert snap["service"] == 4 + 2 * 2 and snap["output_tokens"] == 2  # charged for what it computed
    scheduler_hooks.abort_output(None, scheduler, None, req)  # a second notice changes nothing
    assert state.snapshot()["alice"]["service"] == 8


def test_request_aborted_while_waiting_is_dropped_at_once() -> None:
    state = fair_state()
    req = FakeReq("w1", "bob", [1, 2, 3])
    state.arrive(req)
    state.abandon(req)
    assert not state.waiting and state.snapshot()["bob"]["waiting"] == 0


def test_a_prompt_of_zero_tokens_is_refused_before_the_scheduler() -> None:
    """Seen on the CPU server: ``/generate`` with empty text (the tiny tokenizer adds no BOS) crashed
    SGLang's scheduler in the model's forward (a 0-token extend), and the server with it."""
    obj = SimpleNamespace(input_embeds=None)
    manager = SimpleNamespace(model_config=SimpleNamespace(vocab_size=8))
    with pytest.raises(ValueError, match="prompt is empty"):
        http_hooks.validate_request(manager, obj, [])
    assert http_hooks.validate_request(manager, obj, [5]) is None
    assert http_hooks.validate_request(manager, SimpleNamespace(input_embeds=[[0.1]]), []) is None
    assert http_hooks.validate_request(manager, obj, None) is None


@pytest.mark.parametrize("ids", [[0, 8], [-1], [3, 2**40]])
def test_a_token_id_outside_the_vocabulary_is_refused_before_the_scheduler(ids: list[int]) -> None:
    """Seen in CI: ``"prompt": [-3]`` on /v1/completions crashed the scheduler (IndexError in the
    embedding), and the server with it. The bounds are [0, vocab_size); 0 and 7 pass."""
    manager = SimpleNamespace(model_config=SimpleNamespace(vocab_size=8))
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        http_hooks.validate_request(manager, SimpleNamespace(input_embeds=None), ids)
    assert http_hooks.validate_request(manager, SimpleNamespace(input_embeds=None), [0, 7]) is None


# ---- overload: a per-client bound on requests in flight ---------------------------------------------
def test_a_client_over_its_inflight_limit_gets_429_and_others_do_not() -> None:
    release = asyncio.Event()
    entered: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        entered.append(scope["state"]["sglang_fair_client"])
        await release.wait()

    limit = ClientInflightMiddleware(app, max_inflight=2)
    mw = ClientIdentityMiddleware(limit, KEYS, "X-Client-Id", lambda: False)

    async def one(key: str) -> Sent:
        sent: Sent = []

        async def receive() -> MutableMapping[str, Any]:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "path": "/v1/completions", "method": "POST", "client": ("10.0.0.1", 5),
                 "headers": [(b"authorization", f"Bearer {key}".encode())]}
        await mw(scope, receive, send)
        return sent

    async def scenario() -> None:
        first = [asyncio.create_task(one("k-alice")) for _ in range(2)]
        await asyncio.sleep(0)
        refused = await one("k-alice")
        assert refused[0]["status"] == 429 and (b"retry-after", b"1") in refused[0]["headers"]
        assert json.loads(refused[1]["body"])["type"] == "TooManyRequests"
        bob = asyncio.create_task(one("k-bob"))  # another client is not affected
        await asyncio.sleep(0)
        assert entered == ["alice", "alice", "bob"]
        release.set()
        await asyncio.gather(*first, bob)
        assert limit.inflight == {}  # released (and no entry kept per client)
        assert await one("k-alice") == []

    asyncio.run(scenario())


def test_a_slot_is_free_once_the_answer_is_sent_not_when_the_app_returns() -> None:
    """Seen in CI through the gateway: SGLang's streams run a 2 s abort task after their last byte, so a
    client streaming one request after another was refused with none in flight."""
    background = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"data: [DONE]", "more_body": False})
        await background.wait()  # SGLang's create_abort_task

    limit = ClientInflightMiddleware(app, max_inflight=1)
    mw = ClientIdentityMiddleware(limit, KEYS, "X-Client-Id", lambda: False)
    scope = {"type": "http", "path": "/generate", "method": "POST", "client": ("10.0.0.1", 5),
             "headers": [(b"authorization", b"Bearer k-alice")]}

    async def one(sent: Sent) -> None:
        async def receive() -> MutableMapping[str, Any]:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        await mw(dict(scope), receive, send)

    async def scenario() -> None:
        first, second = [], []
        running = asyncio.create_task(one(first))
        await asyncio.sleep(0)
        assert first[-1]["body"] == b"data: [DONE]" and not running.done() and limit.inflight == {}
        task = asyncio.create_task(one(second))
        await asyncio.sleep(0)
        assert second[0]["status"] == 200, second  # admitted, not 429
        background.set()
        await asyncio.gather(running, task)
        assert limit.inflight == {}

    asyncio.run(scenario())


@pytest.mark.sglang
def test_an_absurd_n_is_refused_before_sglang_expands_the_batch() -> None:
    """Found by the generated e2e test: ``n`` = 10^12 made SGLang multiply the prompt list by n."""
    from sglang.srt.managers.io_struct import GenerateReqInput

    request = SimpleNamespace(scope={"state": {"sglang_fair_client": "alice"}})

    def original(self: Any, obj: Any, request: Any) -> str:
        return "sent"

    with pytest.raises(ValueError, match="n must be at most 128"):
        http_hooks.generate_request(original, None, GenerateReqInput(text="a", sampling_params={"n": 10**12}),
                                    request)
    listed = GenerateReqInput(text=["a"], sampling_params=[{"n": 129}])
    with pytest.raises(ValueError):
        http_hooks.generate_request(original, None, listed, request)
    ok = GenerateReqInput(text="a", sampling_params={"n": 128})
    assert http_hooks.generate_request(original, None, ok, request) == "sent"


@pytest.mark.sglang
@pytest.mark.parametrize(("fields", "message"), [
    ({"text": "hi", "sampling_params": [{}]}, "must be an object for a single prompt"),
    ({"text": "", "sampling_params": []}, "must be an object for a single prompt"),
    ({"input_ids": [1, 2], "sampling_params": [{}]}, "must be an object for a single prompt"),
    ({"text": ["a", "b"], "sampling_params": [{}]}, "1 entries for a batch of 2"),
    ({"input_ids": [[1], [2]], "sampling_params": []}, "0 entries for a batch of 2"),
    ({"text": [], "sampling_params": []}, "an empty list"),  # found 2026-11-28
])
def test_sampling_params_not_fitting_the_prompts_are_refused(fields: dict[str, Any], message: str) -> None:
    """Found by the generated e2e test (2026-11-24): SGLang answered these with a 500."""
    from sglang.srt.managers.io_struct import GenerateReqInput

    def original(self: Any, obj: Any, request: Any) -> str:
        return "sent"

    with pytest.raises(ValueError, match=message):
        http_hooks.generate_request(original, None, GenerateReqInput(**fields), None)
    crashed = GenerateReqInput(**fields)  # the precondition: SGLang itself fails on it, not with a 400
    with pytest.raises((AttributeError, IndexError)):
        crashed.normalize_batch_and_arguments()
        if crashed.is_single:
            crashed.sampling_params.get("max_new_tokens")  # what _validate_one_request does
        else:
            [crashed[i] for i in range(crashed.batch_size)]


@pytest.mark.sglang
@pytest.mark.parametrize("fields", [{"text": "hi"}, {"text": "hi", "sampling_params": {"n": 2}},
                                    {"text": ["a", "b"], "sampling_params": [{}, {"n": 2}]},
                                    {"text": ["a", "b"], "sampling_params": {}}, {"input_ids": [[1], [2]]}])
def test_sampling_params_that_fit_the_prompts_pass(fields: dict[str, Any]) -> None:
    from sglang.srt.managers.io_struct import GenerateReqInput

    assert http_hooks.sampling_params_error(GenerateReqInput(**fields)) is None
