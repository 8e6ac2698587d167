"""README.md, docs/guides/serve.md and ``serve --help`` give one list of what turns the fair defaults off,
and docs/guides/serve.md the ``--batch-*`` flags as ``serve --help`` has them: the docs' blocks are generated
(``scripts/sync_docs.py``) and must match the code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

from sglang_fair.sglang_plugin.cli import EPILOG
from sglang_fair.sglang_plugin.defaults import ADMISSION_OFF, defaults_summary, fair_unsupported
from sglang_fair.sglang_plugin.router_launch import ROUTER_OFF, router_unsupported

ROOT = Path(__file__).resolve().parents[2]


def sync_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_docs", ROOT / "scripts" / "sync_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_docs_blocks_are_what_the_code_generates() -> None:
    docs = sync_docs()
    for name in docs.FILES:
        text = (ROOT / name).read_text()
        assert docs.synced(text) == text, f"{name}: run .venv/bin/python scripts/sync_docs.py"
    readme, serving = (" ".join((ROOT / n).read_text().split()) for n in ("README.md", "docs/guides/serve.md"))
    summary = defaults_summary(markdown=True)
    assert summary in readme and summary in serving
    assert "| `--batch-ttft` |" in serving and "003:" not in serving


def test_a_stale_block_is_found_and_rewritten() -> None:
    docs = sync_docs()
    stale = ("before\n<!-- generated: fair-defaults (x) -->\nLoRA, PP\n"
             "<!-- end generated: fair-defaults -->\nafter\n")
    fresh = docs.synced(stale)
    assert fresh != stale and defaults_summary(markdown=True) in " ".join(fresh.split())
    assert "LoRA, PP" not in fresh
    assert fresh.startswith("before\n") and fresh.endswith("after\n") and docs.synced(fresh) == fresh


def test_serve_help_lists_every_feature_the_checks_test() -> None:
    everything = SimpleNamespace(enable_lora=True, pp_size=2, disaggregation_mode="prefill",
                                 enable_priority_scheduling=True, hicache_storage_backend="file",
                                 dllm_algorithm="x", enable_dp_attention=True, nnodes=2, sleep_on_idle=True)
    found = fair_unsupported(everything) + router_unsupported(everything)
    assert len(found) == len(ADMISSION_OFF) + len(ROUTER_OFF)  # every entry's check fires
    flat = " ".join(EPILOG.split())
    assert all(name in flat for name in found) and "--kv-events-config" in flat
    assert fair_unsupported(SimpleNamespace()) == [] and router_unsupported(SimpleNamespace()) == []
