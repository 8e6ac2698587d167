"""The gateway's own tokenizer (``--tokenizer``): which shapes it renders itself, which it leaves to a
server's ``/tokenize`` (counted), and that it is trusted only when its start-up probes give the
server's ids. Equality with a real SGLang server's ``/tokenize``: tests/e2e/test_gateway_e2e.py."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
from transformers import AutoTokenizer

from sglang_fair.gateway.local_tokens import PROBES, LocalTokenizer, local_tokenizer
from sglang_fair.gateway.prompt import CHAT, ServerTokenizer, token_source
from sglang_fair.gateway.servers import ServerInfo, server_info

ROOT = Path(__file__).resolve().parents[2]
USER = {"role": "user", "content": "the fair share"}


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> LocalTokenizer:
    spec = importlib.util.spec_from_file_location("make_tiny_model", ROOT / "scripts" / "make_tiny_model.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    sys.modules["make_tiny_model"] = maker
    spec.loader.exec_module(maker)
    out = tmp_path_factory.mktemp("tiny-tokenizer")
    maker.build_tokenizer(out, 0)
    return LocalTokenizer(str(out))


def rendered_by_hand(local: LocalTokenizer, messages: list[dict[str, str]]) -> list[int]:
    """What the tiny model's template (scripts/make_tiny_model.py) renders, encoded as SGLang does."""
    text = "".join(f"<|{m['role']}|>{m['content']}</s>" for m in messages) + "<|assistant|>"
    return list(local.tokenizer.encode(text, add_special_tokens=False))


@pytest.mark.parametrize(("body", "why"), [
    ({"messages": [USER], "tools": [{"type": "function", "function": {"name": "f"}}]}, "field tools"),
    ({"messages": [USER], "chat_template_kwargs": {"enable_thinking": False}}, "field chat_template_kwargs"),
    ({"messages": [USER], "tool_choice": "none"}, "field tool_choice"),
    ({"messages": [USER], "continue_final_message": True}, "field continue_final_message"),
    ({"messages": [USER, {"role": "assistant", "content": "so"}]}, "last message is the assistant's"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}, "message shape"),
    ({"messages": [{**USER, "name": "n"}]}, "message shape"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "message shape"),
    ({"messages": []}, "messages shape"),
])
def test_shapes_it_does_not_mirror_are_left_to_the_server_and_counted(
        local: LocalTokenizer, body: dict[str, Any], why: str) -> None:
    before = local.counts[f"asked: {why}"]
    assert local.ids(token_source(CHAT, body)) is None
    assert local.counts[f"asked: {why}"] == before + 1


def test_plain_chats_and_prompts_are_rendered_as_the_template_says(local: LocalTokenizer) -> None:
    turns = [{"role": "system", "content": "be fair"}, USER, {"role": "assistant", "content": "yes"}, USER]
    body = {"model": "m", "messages": turns, "max_tokens": 3, "temperature": 0.0, "stream": True}
    assert local.template is not None  # rendered without apply_chat_template's wrapper
    assert local.ids(token_source(CHAT, body)) == rendered_by_hand(local, turns)
    assert local.ids({"prompt": "the queue"}) == list(local.tokenizer.encode("the queue"))
    assert local.ids(token_source("/v1/completions", {"prompt": ["the queue", "x"]})) == \
        list(local.tokenizer.encode("the queue"))  # a batch routes on its first prompt


def test_long_chats_with_a_shared_beginning_come_from_cached_pieces(local: LocalTokenizer) -> None:
    assert local.pieces is not None and local.pieces_verdict == "on"
    shared = " ".join(f"rule {i}: be fair." for i in range(60))
    chats = [[{"role": "system", "content": shared}, {"role": "user", "content": f"{shared} and {i} more"}]
             for i in range(4)]
    before = local.pieces.counts["pieces cached"]
    assert [local.ids({"messages": m}) for m in chats] == [rendered_by_hand(local, m) for m in chats]
    assert local.pieces.counts["pieces cached"] - before > 3 * len(local.pieces.cuts(shared))


def test_gpt2s_real_vocabulary_from_pieces_equals_apply_chat_template(tmp_path: Path) -> None:
    """scripts/make_gpt2_tokenizer.py (GPT-2's 50,257 tokens, a ChatML template): pieces are on, and plain
    chats of English text with shared beginnings give apply_chat_template's ids."""
    out = tmp_path / "gpt2"
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_gpt2_tokenizer.py"), str(out)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    local, hf, rng = LocalTokenizer(str(out)), AutoTokenizer.from_pretrained(out), random.Random(0)
    assert local.pieces is not None and local.pieces_verdict == "on"
    words = ["The", "fair", "share", "of", "a", "worker's", "cache,", "isn't", "it?", "3.14", "tokens\n\n",
             "", "per", "second:", "don't", "wait", "数字", "🙂"]
    shared = " ".join(rng.choices(words, k=400))
    for _ in range(20):
        chat = [{"role": "system", "content": shared[:rng.randint(0, len(shared))]},
                {"role": "user", "content": " ".join(rng.choices(words, k=rng.randint(1, 80)))}]
        want = hf.apply_chat_template(chat, add_generation_prompt=True)
        assert local.ids({"messages": chat}) == list(getattr(want, "input_ids", want))
    assert local.pieces.counts["pieces cached"] > 20 and local.pieces.counts["parts cached"] > 0


TEMPLATES = {  # features of real models' templates, each rendered here as transformers renders it
    "blocks": "{% for m in messages %}\n  {% if m.role == 'system' %}<<{{ m.content }}>>\n{% else %}"
              "[{{ m.role }}] {{ m.content | trim }}{{ eos_token }}\n{% endif %}\n{% endfor %}"
              "{% if add_generation_prompt %}[assistant]{% endif %}",
    "tojson": "{{ bos_token }}{% for m in messages %}{{ m | tojson }}{% endfor %}",
    "generation": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}A: {{ m.content }}"
                  "{% endgeneration %}{% else %}U: {{ m.content }}{% endif %}{% endfor %}",
    "raises": "{% if messages[0].role != 'user' %}{{ raise_exception('user first') }}{% endif %}"
              "{% for m in messages %}{{ m.content }}{% break %}{% endfor %}",
}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_templates_render_as_transformers_renders_them(name: str, local: LocalTokenizer,
                                                       tmp_path: Path) -> None:
    hf = AutoTokenizer.from_pretrained(local.path)
    hf.chat_template = TEMPLATES[name]
    hf.save_pretrained(tmp_path)
    mine, rng = LocalTokenizer(str(tmp_path)), random.Random(4)
    words = ["fair", " share ", "\n", "<b>&", "数字", "\"quoted\"", "🙂"]
    for _ in range(30):
        chat = [{"role": rng.choice(["user", "system", "assistant"]),
                 "content": "".join(rng.choices(words, k=rng.randint(0, 6)))}
                for _ in range(rng.randint(1, 4))]
        try:
            want = hf.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        except Exception as err:  # a template's raise_exception: it must raise here too
            with pytest.raises(type(err)):
                mine.render(chat)
            continue
        assert mine.render(chat) == want


def test_the_gateway_tokenizes_without_importing_transformers_or_torch(local: LocalTokenizer) -> None:
    code = ("import sys; from sglang_fair.gateway.local_tokens import LocalTokenizer; "
            f"t = LocalTokenizer({local.path!r}); "
            "t.ids({'messages': [{'role': 'user', 'content': 'hi'}]}); "
            "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


class FakeServer:
    """A server's ``/tokenize``: right (the local tokenizer's own ids) or off by one token."""

    def __init__(self, local: LocalTokenizer, wrong: bool = False) -> None:
        self.local, self.wrong, self.asked = local, wrong, 0

    async def tokenize(self, body: dict[str, Any]) -> Any:
        self.asked += 1
        if "prompt" in body:
            ids = list(self.local.tokenizer.encode(body["prompt"]))
        else:
            ids = rendered_by_hand(self.local, body["messages"]) if "messages" in body else []
        return {"tokens": ids + [7] if self.wrong and len(body.get("messages", [])) > 1 else ids}


def test_only_a_verified_tokenizer_is_used_and_the_rest_is_asked(local: LocalTokenizer) -> None:
    tokenizer = ServerTokenizer(lambda: [ServerInfo("http://s", "m", 1)], 1.0, local)
    server = FakeServer(local)

    async def post(url: str, path: str, body: bytes, timeout: float) -> Any:
        import json
        return await server.tokenize(json.loads(body))

    tokenizer.post = post

    async def scenario() -> None:
        local.trusted = False
        await tokenizer.tokens(CHAT, {"messages": [USER]})
        assert server.asked == 1  # not verified: asked
        assert await local.verify(server.tokenize) and local.trusted and server.asked == 1 + len(PROBES)
        assert await tokenizer.tokens(CHAT, {"messages": [USER]}) == rendered_by_hand(local, [USER])
        assert server.asked == 1 + len(PROBES) and local.counts["local"] == 1
        with_tools = {"messages": [USER], "tools": []}
        assert await tokenizer.tokens(CHAT, with_tools) == rendered_by_hand(local, [USER])
        assert server.asked == 2 + len(PROBES) and local.counts["asked: field tools"] == 1

    asyncio.run(scenario())


def test_a_server_that_renders_otherwise_turns_it_off(local: LocalTokenizer) -> None:
    """The negative control: a probe that differs (here: those of two turns or more) and nothing is local."""
    assert not asyncio.run(local.verify(FakeServer(local, wrong=True).tokenize))
    assert not local.trusted and local.verdict.startswith("off: probe 1 differs")
    multi_turn = [p for p in PROBES if len(p.get("messages", [])) > 2]
    assert multi_turn and any(len(p) == 1 and "prompt" in p for p in PROBES)  # the corpus has both


def test_auto_takes_the_servers_tokenizer_where_it_is_a_directory_here(
        local: LocalTokenizer, caplog: pytest.LogCaptureFixture) -> None:
    info = server_info("http://s", {"model_path": "org/model", "tokenizer_path": local.path, "dp_size": 1})
    assert info.tokenizer_path == local.path
    found = local_tokenizer("auto", [info])
    assert found is not None and found.path == local.path
    elsewhere = server_info("http://s", {"model_path": "org/model", "dp_size": 1})
    assert local_tokenizer("auto", [elsewhere]) is None and "not a directory here" in caplog.text
    assert local_tokenizer("none", [info]) is None and local_tokenizer("", [info]) is None


def test_auto_is_the_default_and_a_directory_without_a_fast_tokenizer_falls_back(
        local: LocalTokenizer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from sglang_fair.core.errors import ConfigError
    from sglang_fair.gateway.config import GatewayConfig

    assert GatewayConfig(worker_urls="http://127.0.0.1:1").tokenizer == "auto"
    slow_only = server_info("http://s", {"model_path": str(tmp_path), "dp_size": 1})  # no tokenizer.json
    assert local_tokenizer("auto", [slow_only]) is None and "no tokenizer.json" in caplog.text
    with pytest.raises(ConfigError, match=r"no tokenizer\.json"):  # named: an error, not a log line
        local_tokenizer(str(tmp_path), [slow_only])


def test_auto_finds_a_hub_model_in_this_machines_hugging_face_cache(
        local: LocalTokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from sglang_fair.gateway.tokenizer_files import hub_snapshot

    repo = tmp_path / "hub" / "models--org--model"
    for revision in ("0ld", "c0ffee"):  # refs/main names the snapshot SGLang's download used
        shutil.copytree(local.path, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c0ffee")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    found = local_tokenizer("auto", [server_info("http://s", {"model_path": "org/model", "dp_size": 1})])
    assert found is not None and found.path == str(repo / "snapshots" / "c0ffee")
    (repo / "refs" / "main").unlink()  # no ref: two snapshots are ambiguous, one is not
    assert hub_snapshot("org/model") == ""
    shutil.rmtree(repo / "snapshots" / "0ld")
    assert hub_snapshot("org/model") == str(repo / "snapshots" / "c0ffee")
    assert hub_snapshot("org/other") == "" and hub_snapshot("../../etc") == ""
    assert hub_snapshot("org/model", {"HF_HUB_CACHE": str(tmp_path / "elsewhere")}) == ""
