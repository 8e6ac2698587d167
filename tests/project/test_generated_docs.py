"""README.md, docs/serving.md and ``serve --help`` give one list of what turns the fair defaults off,
and docs/serving.md the ``--batch-*`` flags as ``serve --help`` has them: the docs' blocks are generated
(``sglang-fair lab sync-docs``) and must match the code."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from sglang_fair.lab import sync_docs as docs
from sglang_fair.sglang_plugin.cli import EPILOG
from sglang_fair.sglang_plugin.defaults import ADMISSION_OFF, defaults_summary, fair_unsupported
from sglang_fair.sglang_plugin.router_launch import ROUTER_OFF, router_unsupported

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_blocks_are_what_the_code_generates() -> None:
    for name in docs.FILES:
        text = (ROOT / name).read_text()
        assert docs.synced(text) == text, f"{name}: run .venv/bin/sglang-fair lab sync-docs"
    readme, serving = (" ".join((ROOT / n).read_text().split()) for n in ("README.md", "docs/serving.md"))
    summary = defaults_summary(markdown=True)
    assert summary in readme and summary in serving
    assert "| `--batch-ttft` |" in serving and "003:" not in serving


def test_a_stale_block_is_found_and_rewritten() -> None:
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
