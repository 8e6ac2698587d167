"""``sglang-fair gateway`` in front of two real ``sglang-fair serve`` instances on CPU (tiny model).

Server A runs two data-parallel workers behind its fair router, server B one worker; both trust the
gateway's token and publish their workers' feedback on a CurveZMQ port the gateway hears. Through the
gateway: chat (whole and streamed, n = 2) and ``/generate`` answer 200 with the model's output,
distinct prompts reach all three workers (so both servers) with the client the key names, and a wrong
key gets 401. Directly at a server, a pinned rank without the token is 403. Every worker's heartbeats
and the evictions of a full cache reach the gateway; SIGSTOP of B's scheduler fails its requests in
flight with 503 within the heartbeat timeout, and B is taken back after SIGCONT. A second gateway
replica shares what the first routes: it hears its dispatches (a prefix routed by one is routed to the
same worker by the other), and when the first is killed with requests in flight, the second releases
them and serves the client retried there. The second tokenizes plain chats and prompts itself
(``--tokenizer DIR``; the first finds the same directory by default, ``auto``): its ids equal the
servers' ``/tokenize`` on a corpus, the rest is asked and counted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fair_e2e_support import children, load_in_threads, stopped_under_load

from sglang_fair.harness.scenario import words
from sglang_fair.harness.server import free_port, get_json, running_server, stop
from sglang_fair.links.curve import make_keys

pytestmark = [pytest.mark.e2e, pytest.mark.timers]

TOKEN = "e2e-gateway-token-0123456789abcdef"
SERVER = ("--max-running-requests", "8", "--max-total-tokens", "4000")
KEY = {"Authorization": "Bearer k-alice"}
GATEWAYS = ("gateway", "gateway-2")  # replicas sharing what they route (--peer-port), CurveZMQ


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None,
         timeout: float = 120.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@pytest.fixture(scope="module")
def cluster(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("gateway")
    (tmp / "token").write_text(TOKEN + "\n")
    (tmp / "keys").write_text("k-alice alice\nk-bob bob\n")
    trust = ("--gateway-token-file", str(tmp / "token"))
    make_keys(tmp / "curve", GATEWAYS)
    curve = ("--feedback-keys", str(tmp / "curve"))
    procs: dict[str, Any] = {}
    with ExitStack() as stack:
        a = stack.enter_context(running_server(
            tiny_model, (*SERVER, *trust, *curve, "--feedback-port", str(free_port())), tmp / "a.log",
            dp_size=2))
        b = stack.enter_context(running_server(
            tiny_model, (*SERVER, *trust, *curve, "--feedback-port", str(free_port())), tmp / "b.log",
            started=lambda proc: procs.update(b=proc)))
        shared = ("--worker-urls", f"{a},{b}", "--client-keys", str(tmp / "keys"), *trust, *curve,
                  "--heartbeat-timeout", "4", "--health-interval", "1", "--health-timeout", "3",
                  "--peer-timeout", "2")
        ports = {name: (free_port(), free_port()) for name in GATEWAYS}
        urls = {}
        for name, (port, peer_port) in ports.items():
            peers = ",".join(f"{other}@127.0.0.1:{ports[other][1]}" for other in GATEWAYS if other != name)
            cmd = [sys.executable, "-m", "sglang_fair.cli", "gateway", *shared, "--port", str(port),
                   "--feedback-key-name", name, "--peer-port", str(peer_port), "--peer-addresses", peers]
            if name == "gateway-2":  # tokenizes plain chats and prompts itself (verified at start-up)
                cmd += ["--tokenizer", str(tiny_model)]
            with open(tmp / f"{name}.log", "wb") as log:
                procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True)
            stack.callback(stop, procs[name])
            urls[name] = f"http://127.0.0.1:{port}"
        for name, url in urls.items():
            deadline = time.monotonic() + 60
            while True:
                try:
                    get_json(url + "/health", timeout=2)
                    break
                except OSError:
                    assert procs[name].poll() is None and time.monotonic() < deadline, \
                        (tmp / f"{name}.log").read_text()
                    time.sleep(0.3)
        yield {"a": a, "b": b, **urls, "b_proc": procs["b"], "gateway_proc": procs["gateway"]}


def test_chat_and_generate_through_the_gateway(cluster: dict[str, Any]) -> None:
    chat = {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 4, "ignore_eos": True}
    status, raw = post(cluster["gateway"] + "/v1/chat/completions", chat, KEY)
    assert status == 200, raw
    answer = json.loads(raw)
    assert answer["usage"]["completion_tokens"] == 4
    status, raw = post(cluster["b"] + "/tokenize", chat)  # what the gateway keys the tree with
    assert status == 200 and json.loads(raw)["count"] == answer["usage"]["prompt_tokens"], raw
    assert isinstance(answer["choices"][0]["message"]["content"], str)
    status, raw = post(cluster["gateway"] + "/v1/chat/completions", {**chat, "n": 2}, KEY)
    assert status == 200 and len(json.loads(raw)["choices"]) == 2, raw
    status, raw = post(cluster["gateway"] + "/v1/chat/completions", {**chat, "stream": True}, KEY)
    events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert status == 200 and events[-1] == "[DONE]", raw
    chunks = [json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1]]
    assert "".join(chunks), events
    generate = {"text": "once upon", "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}}
    status, raw = post(cluster["gateway"] + "/generate", generate, KEY)
    meta = json.loads(raw)["meta_info"]
    assert status == 200 and meta["completion_tokens"] == 3, raw
    status, raw = post(cluster["a"] + "/tokenize", {"prompt": generate["text"]})
    assert status == 200 and json.loads(raw)["count"] == meta["prompt_tokens"], raw


def test_requests_reach_every_worker_of_both_servers_as_their_client(cluster: dict[str, Any]) -> None:
    """Six distinct prompts sent together (one at a time, a client goes back to its last worker while
    it has credit there: how long that lasts is the quantum, a time)."""
    bodies = [{"text": f"{i} distinct prompt number {i} " * 3, "sampling_params": {"max_new_tokens": 8}}
              for i in range(6)]
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda body: post(cluster["gateway"] + "/generate", body, KEY), bodies))
    assert all(status == 200 for status, _ in answers), answers
    state = get_json(cluster["gateway"] + "/gateway/state")
    assert [(w["server"], w["rank"]) for w in state["workers"]] == [
        (cluster["a"], 0), (cluster["a"], 1), (cluster["b"], 0)]
    assert all(w["routed"] >= 1 and w["queue"] == 0 for w in state["workers"]), state["workers"]
    for server in ("a", "b"):
        clients = get_json(cluster[server] + "/fairness")["clients"]
        assert clients.get("alice", {}).get("requests", 0) >= 1, (server, clients)


def test_a_wrong_key_is_refused(cluster: dict[str, Any]) -> None:
    status, raw = post(cluster["gateway"] + "/generate", {"text": "x"}, {"Authorization": "Bearer nope"})
    assert status == 401 and json.loads(raw)["code"] == 401


def test_a_pinned_rank_without_the_token_is_refused_by_the_server(cluster: dict[str, Any]) -> None:
    body = {"text": "x", "sampling_params": {"max_new_tokens": 1}}
    for server in ("a", "b"):
        status, raw = post(cluster[server] + "/generate", {**body, "routed_dp_rank": 0})
        assert status == 403 and "trusted gateway" in json.loads(raw)["message"], raw
    status, raw = post(cluster["a"] + "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1},
                       {"X-Data-Parallel-Rank": "1"})
    assert status == 403, raw
    status, raw = post(cluster["a"] + "/generate", {**body, "routed_dp_rank": 1},
                       {"X-Sglang-Fair-Gateway-Token": TOKEN})
    assert status == 200 and json.loads(raw)["meta_info"]["dp_rank"] == 1, raw


def test_every_workers_heartbeats_and_a_full_caches_evictions_reach_the_gateway(
        cluster: dict[str, Any]) -> None:
    for i in range(40):  # distinct 1200-token prompts overflow the 4000-token caches
        state = get_json(cluster["gateway"] + "/gateway/state")
        if state["feedback"]["evictions"]:
            break
        status, raw = post(cluster["gateway"] + "/generate",
                           {"text": words(900 + i, 1200), "sampling_params": {"max_new_tokens": 1}}, KEY)
        assert status == 200, raw
    assert state["feedback"]["evictions"] > 0 and state["feedback"]["heartbeats"] >= 3, state
    assert state["servers_out"] == {}


def test_a_stopped_scheduler_fails_its_requests_in_flight_and_its_server_comes_back(
        cluster: dict[str, Any]) -> None:
    """SIGSTOP of B's scheduler: its heartbeats stop with it, so after --heartbeat-timeout (4 s) the
    gateway takes B out and its requests in flight fail with 503 naming why (none hangs); the others
    finish on A. After SIGCONT, B beats and passes its probe again and takes requests again."""
    gateway = cluster["gateway"]
    outcomes, threads = load_in_threads(gateway, ["alice"] * 6, 700, 40, 300, headers=lambda _: KEY)
    deadline = time.monotonic() + 30
    while get_json(gateway + "/gateway/state")["workers"][2]["queue"] == 0:
        assert time.monotonic() < deadline, "nothing reached server B"
        time.sleep(0.05)
    (scheduler,) = children(cluster["b_proc"], "scheduler")
    stopped = stopped_under_load(scheduler, threads)
    statuses = sorted(o.status for o in outcomes)
    assert set(statuses) <= {200, 503} and 503 in statuses, statuses
    failed_after = [round(o.sent + (o.latency or 0) - stopped, 1) for o in outcomes if o.status == 503]
    print("\n503s this long after SIGSTOP (s):", failed_after)
    assert max(failed_after) <= 4.5 + 4.0, failed_after  # heartbeat timeout + one check; slack
    deadline = time.monotonic() + 30
    while get_json(gateway + "/gateway/state")["servers_out"]:
        assert time.monotonic() < deadline, "server B was not taken back"
        time.sleep(0.5)
    before = get_json(gateway + "/gateway/state")["workers"][2]["routed"]
    for i in range(12):
        status, raw = post(gateway + "/generate",
                           {"text": words(800 + i, 30), "sampling_params": {"max_new_tokens": 1}}, KEY)
        assert status == 200, raw
    assert get_json(gateway + "/gateway/state")["workers"][2]["routed"] > before


TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
CORPUS = [  # (path, body, whether the gateway renders it itself)
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "the fair share"}]}, True),
    ("/v1/chat/completions", {"max_tokens": 4, "temperature": 0.5, "stream": True, "messages": [
        {"role": "system", "content": "You are a queue."}, {"role": "user", "content": words(1, 40)},
        {"role": "assistant", "content": "the answer\n  is\tspaced"},
        {"role": "user", "content": "<|user|>ünïcödé 数字 </s>"}]}, True),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "tools": TOOLS}, False),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "chat_template_kwargs": {"enable_thinking": False}}, False),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]},
     False),
    ("/v1/completions", {"prompt": words(2, 60)}, True),
    ("/v1/completions", {"prompt": [" the batch's first", "second"]}, True),
    ("/generate", {"text": "a generate prompt\n"}, True),
    *[("/v1/chat/completions", {"messages": [  # a long system prompt, shared: from cached pieces
        {"role": "system", "content": words(3, 150)},
        {"role": "user", "content": f"{words(4 + i, 50)}  {i}"}]},
       True) for i in range(2)],
]


def test_the_gateways_own_tokens_are_the_servers_on_a_corpus(cluster: dict[str, Any],
                                                             tiny_model: Path) -> None:
    from sglang_fair.gateway.local_tokens import LocalTokenizer
    from sglang_fair.gateway.prompt import token_source

    local = LocalTokenizer(str(tiny_model))
    for path, body, rendered_here in CORPUS:
        source = token_source(path, body)
        mine = local.ids(source)
        assert (mine is not None) == rendered_here, (path, body)
        status, raw = post(cluster["a"] + "/tokenize", source)
        assert status == 200, raw
        theirs = json.loads(raw)["tokens"]
        if mine is not None:
            assert mine == theirs, (path, body)
    assert local.pieces is not None and local.pieces.on and local.pieces.counts["pieces cached"] > 5
    two = cluster["gateway-2"]
    status, _ = post(two + "/v1/chat/completions", {**CORPUS[1][1], "stream": False}, KEY)
    assert status == 200
    status, _ = post(two + "/v1/chat/completions", {**CORPUS[2][1], "max_tokens": 2}, KEY)
    assert status == 200
    tokens = get_json(two + "/gateway/state")["local_tokenizer"]
    assert tokens["verdict"].startswith("on:") and tokens["local"] >= 1 and tokens["asked: field tools"] >= 1
    found = get_json(cluster["gateway"] + "/gateway/state")["local_tokenizer"]  # no flag: auto
    assert found["path"] == str(tiny_model) and found["verdict"].startswith("on:"), found


def test_a_second_gateway_hears_the_firsts_dispatches_and_routes_a_prefix_alike(
        cluster: dict[str, Any]) -> None:
    one, two = cluster["gateway"], cluster["gateway-2"]
    peers = get_json(two + "/gateway/state")["peers"]
    assert [r["hears_me"] and r["same_workers"] for r in peers["runs"].values()] == [True], peers
    prompt = words(4000, 300)
    before = [w["routed"] for w in get_json(one + "/gateway/state")["workers"]]
    seen = get_json(two + "/gateway/state")["observed_from_peers"]
    status, raw = post(one + "/generate", {"text": prompt, "sampling_params": {"max_new_tokens": 1}}, KEY)
    assert status == 200, raw
    after = [w["routed"] for w in get_json(one + "/gateway/state")["workers"]]
    (chosen,) = [i for i, (x, y) in enumerate(zip(before, after, strict=True)) if y > x]
    assert get_json(two + "/gateway/state")["observed_from_peers"] == seen + 1
    deadline = time.monotonic() + 10  # its finish reaches the peer after the response: until then
    while get_json(two + "/gateway/state")["workers"][chosen]["queue"] > 0:  # the holder looks busier
        assert time.monotonic() < deadline, "the second gateway did not hear the request finish"
        time.sleep(0.05)
    routed = [w["routed"] for w in get_json(two + "/gateway/state")["workers"]]
    longer = {"text": prompt + " and more", "sampling_params": {"max_new_tokens": 1}}
    status, raw = post(two + "/generate", longer, KEY)
    assert status == 200, raw
    now = [w["routed"] for w in get_json(two + "/gateway/state")["workers"]]
    assert [y - x for x, y in zip(routed, now, strict=True)] == [int(i == chosen) for i in range(3)]


def test_a_killed_gateway_loses_nothing_at_its_peer(cluster: dict[str, Any]) -> None:
    """SIGKILL of the first gateway with requests in flight: the servers abort what it relayed, the
    second releases them within --peer-timeout (2 s), and serves the client retried there."""
    import os
    import signal

    one, two = cluster["gateway"], cluster["gateway-2"]
    _, threads = load_in_threads(one, ["alice"] * 4, 700, 40, 300, headers=lambda _: KEY)
    deadline = time.monotonic() + 30
    while sum(w["queue"] for w in get_json(two + "/gateway/state")["workers"]) == 0:
        assert time.monotonic() < deadline, "the second gateway heard of nothing in flight"
        time.sleep(0.05)
    os.killpg(cluster["gateway_proc"].pid, signal.SIGKILL)
    killed = time.monotonic()
    for thread in threads:
        thread.join(timeout=60)
    while sum(w["queue"] for w in get_json(two + "/gateway/state")["workers"]):
        assert time.monotonic() - killed < 10, get_json(two + "/gateway/state")
        time.sleep(0.1)
    print(f"\nreleased at the peer {time.monotonic() - killed:.1f} s after SIGKILL")
    assert get_json(two + "/gateway/state")["peers"]["released"] >= 1
    def served() -> int:
        return sum(get_json(cluster[s] + "/fairness")["clients"]["alice"]["requests"] for s in ("a", "b"))

    before = served()
    status, raw = post(two + "/generate", {"text": "retried", "sampling_params": {"max_new_tokens": 2}}, KEY)
    assert status == 200, raw  # the same key, the same client, at the other replica
    deadline = time.monotonic() + 5  # /fairness counts what the schedulers last published (every ~0.5 s)
    while served() != before + 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert served() == before + 1
