"""The bad-input cases of the real CPU server and of the gateway in front of it
(``test_bad_input_e2e.py``): the server's flags and keys, the table of cases, generated bodies, and raw
HTTP."""

from __future__ import annotations

import http.client
import json
from typing import Any

KEYS = {"alice": "k-alice", "bob": "k-bob", "carol": "k-carol", "dave": "k-dave", "erin": "k-erin",
        "ops": "k-ops"}
A = {"Authorization": "Bearer k-alice"}
MAX_INFLIGHT = 3
OPS = {"Authorization": "Bearer k-ops"}
CONTEXT = 4096
MODEL = {"model": "default"}  # SGLang's default name; another name gets 404
GOOD = {**MODEL, "prompt": "the fair share", "max_tokens": 2}
SERVER_ARGS = ("--schedule-policy", "dlpm_light", "--max-running-requests", "8",
               "--max-total-tokens", "20000", "--context-length", str(CONTEXT), "--fairness-admins", "ops",
               "--client-max-inflight", str(MAX_INFLIGHT))
TOKEN = "e2e-gateway-bad-input-token-0123456789"  # the server trusts the gateway in front of it


def raw(url: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """POST raw bytes; (status, body), or (0, b"") when the server closed the connection."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        conn.request("POST", path, body=body, headers={"content-type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (ConnectionError, http.client.HTTPException):
        return 0, b""
    finally:
        conn.close()


def still_serving(url: str) -> None:
    """A good request to ``url`` is answered 200."""
    status, data = raw(url, "/v1/completions", json.dumps(GOOD).encode(), A)
    assert status == 200, data[:300]


def error_message(data: bytes) -> str:
    """The message of an OpenAI-style error body (SGLang's native /generate nests it in ``error``)."""
    doc: Any = json.loads(data)
    if isinstance(doc.get("error"), dict):
        doc = doc["error"]
    assert isinstance(doc.get("message"), str) and doc["message"], doc
    return str(doc["message"])


CASES: dict[str, tuple[str, bytes, int]] = {
    "malformed JSON (chat)": ("/v1/chat/completions", b'{"model": "default", "messages": [', 400),
    "malformed JSON (generate)": ("/generate", b'{"text": ', 400),
    "not JSON": ("/v1/completions", b"hello", 400),
    "max_tokens a string": ("/v1/completions", json.dumps({**GOOD, "max_tokens": "ten"}).encode(), 400),
    "messages a string": ("/v1/chat/completions", json.dumps({**MODEL, "messages": "hi"}).encode(), 400),
    "prompt an object": ("/v1/completions", json.dumps({**MODEL, "prompt": {"x": 1}}).encode(), 400),
    "no messages": ("/v1/chat/completions", json.dumps(MODEL).encode(), 400),
    "no prompt": ("/v1/completions", json.dumps(MODEL).encode(), 400),
    "empty prompt": ("/v1/completions", json.dumps({**GOOD, "prompt": ""}).encode(), 400),
    "empty messages": ("/v1/chat/completions", json.dumps({**MODEL, "messages": []}).encode(), 400),
    "empty text (generate)": ("/generate", json.dumps({"text": "", "sampling_params": {"max_new_tokens": 2}})
                              .encode(), 400),
    "empty input_ids (generate)": ("/generate", json.dumps({"input_ids": []}).encode(), 400),
    # a list of sampling params is for a batch, one per prompt: SGLang answered 500 (found by the
    # generated requests below, 2026-11-24: {"text": "", "sampling_params": []})
    "sampling_params a list, one prompt (generate)": ("/generate", json.dumps(
        {"text": "hi", "sampling_params": [{}]}).encode(), 400),
    "sampling_params shorter than the batch (generate)": ("/generate", json.dumps(
        {"text": ["a", "b"], "sampling_params": [{}]}).encode(), 400),
    # token ids outside the vocabulary reached the embedding and crashed the scheduler (found by the
    # generated requests below)
    "token id -3 (completions)": ("/v1/completions", json.dumps({**GOOD, "prompt": [5, -3]}).encode(), 400),
    "token id 10^6 (completions)": ("/v1/completions", json.dumps({**GOOD, "prompt": [10**6]}).encode(), 400),
    "token id 10^6 (generate)": ("/generate", json.dumps({"input_ids": [1, 10**6]}).encode(), 400),
    "prompt over the context": ("/v1/completions", json.dumps({**GOOD, "prompt": "the " * 20_000}).encode(),
                                400),
    "max_tokens 10^9": ("/v1/completions", json.dumps({**GOOD, "max_tokens": 10**9}).encode(), 400),
    "max_tokens -1": ("/v1/completions", json.dumps({**GOOD, "max_tokens": -1}).encode(), 400),
    "unknown model": ("/v1/completions", json.dumps({**GOOD, "model": "gpt-4o"}).encode(), 404),
}


def bodies(kind: str) -> Any:
    """Request bodies whose fields are of any JSON type, some plausible, some absurd."""
    from hypothesis import strategies as st

    ints = st.lists(st.integers(-5, 400), max_size=4)
    maps = st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)
    junk = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(),
                     st.text(max_size=12), ints, maps)
    small = st.one_of(st.integers(-3, 12), st.just(10**12), junk)
    text = st.text(min_size=1, max_size=30)
    message = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "tool", "x"]),
                                     "content": st.one_of(text, junk)})
    fields = {"model": st.one_of(st.just("default"), junk), "max_tokens": small, "n": small,
              "temperature": junk, "top_p": junk, "stop": junk, "stream": st.one_of(st.booleans(), junk),
              "seed": junk, "logprobs": junk, "user": junk}
    if kind == "generate":  # SGLang's native API; an empty text crashed the server before the fix
        sampling = st.fixed_dictionaries({}, optional={"max_new_tokens": small, "temperature": junk})
        # a prompt drawn as often as junk, so a run of 40 bodies holds valid ones (found: one that held
        # none failed the check that both kinds ran)
        return st.fixed_dictionaries({"text": st.one_of(text, st.text(max_size=20), junk)},
                                     optional={"sampling_params": st.one_of(sampling, junk), "stream": junk})
    main = ({"messages": st.one_of(st.lists(message, min_size=1, max_size=3), junk)} if kind == "chat"
            else {"prompt": st.one_of(text, st.lists(st.integers(0, 380), min_size=1, max_size=6), junk)})
    return st.fixed_dictionaries(main, optional=fields)


PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}
