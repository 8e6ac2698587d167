"""A model directory's tokenizer and chat template, loaded with ``tokenizers`` and ``jinja2`` alone.

``transformers`` (what SGLang loads them with) imports torch: a gateway that imported it grew from about
73 to 485-548 MiB. :class:`TokenizerFiles` reads the same files as ``transformers`` 5.19 does for a fast
tokenizer: ``tokenizer.json`` (the ``tokenizers`` object that encodes, special tokens and all, by its
post-processor), ``tokenizer_config.json`` (the special tokens a template may name) and the chat template
(``chat_template.jinja``, else ``tokenizer_config.json``'s ``chat_template``, a string or the entry named
``default``, else ``chat_template.json``). :func:`compiled` compiles a template in the environment
``transformers`` renders it in. Nothing here is trusted for being read alike: the gateway uses its own ids
only once its start-up probes equal a server's ``/tokenize`` (:meth:`LocalTokenizer.verify`).
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from sglang_fair.core.errors import ConfigError

SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class TokenizerFiles:
    """``backend`` (a ``tokenizers.Tokenizer``), ``special_tokens_map`` and ``chat_template`` ('' if
    none) of the tokenizer in ``path``."""

    def __init__(self, path: str) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as err:
            raise ConfigError(f"--tokenizer needs tokenizers ({err}): pip install "
                              "'sglang-fair[gateway]'") from None
        root = Path(path)
        if not (root / "tokenizer.json").is_file():
            raise ConfigError(f"--tokenizer {path}: no tokenizer.json there (a fast tokenizer is needed)")
        try:
            self.backend = Tokenizer.from_file(str(root / "tokenizer.json"))
            config = read_json(root / "tokenizer_config.json")
            self.chat_template = chat_template_in(root, config)
        except Exception as err:  # tokenizers raises a plain Exception on a bad file
            raise ConfigError(f"--tokenizer {path}: cannot read its tokenizer ({err})") from None
        self.special_tokens_map = {key: token_text(config[key]) for key in SPECIAL_KEYS if config.get(key)}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self.backend.encode(text, add_special_tokens=add_special_tokens).ids)


def hub_snapshot(name: str, environ: dict[str, str] | None = None) -> str:
    """The directory of Hugging Face hub model ``name`` (``org/model``) in this machine's hub cache, as
    SGLang's download left it (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``;
    the snapshot ``refs/main`` names, else the only one), or '' where there is none. Reads only."""
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", name):
        return ""
    env = os.environ if environ is None else environ
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                               "huggingface")
    repo = Path(env.get("HF_HUB_CACHE") or os.path.join(home, "hub")) / f"models--{name.replace('/', '--')}"
    ref = repo / "refs" / "main"
    if ref.is_file():
        snapshot = repo / "snapshots" / ref.read_text(encoding="utf-8").strip()
        return str(snapshot) if snapshot.is_dir() else ""
    found = [d for d in (repo / "snapshots").glob("*") if d.is_dir()]
    return str(found[0]) if len(found) == 1 else ""


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} is not an object")
    return data


def token_text(token: Any) -> str:
    return str(token["content"]) if isinstance(token, dict) else str(token)


def chat_template_in(root: Path, config: dict[str, Any]) -> str:
    if (root / "chat_template.jinja").is_file():
        return (root / "chat_template.jinja").read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, list):
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    if template is None:
        template = read_json(root / "chat_template.json").get("chat_template")
    return template if isinstance(template, str) else ""


def compiled(template: str) -> Any:
    """``template`` compiled as ``transformers`` compiles a chat template: a sandbox that trims blocks,
    loop controls, ``{% generation %}`` kept as its text, ``tojson`` without HTML escapes,
    ``raise_exception`` and ``strftime_now``."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):  # transformers tracks where the assistant's text is; SGLang never asks
        tags = {"generation"}  # noqa: RUF012  (jinja2 declares it a set)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return str(caller())

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    return env.from_string(template)
