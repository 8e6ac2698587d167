"""README.md, docs/guides/serve.md and ``serve --help`` give one list of what turns the fair defaults off,
docs/guides/serve.md the ``--batch-*`` flags as ``serve --help`` has them, and docs/reference/flags.md every
flag of serve, gateway, router, sim and keys: the docs' blocks are generated (``sglang-fair lab sync-docs``)
and must match the code."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from sglang_fair.lab import sync_docs as docs
from sglang_fair.sglang_plugin.cli import EPILOG
from sglang_fair.sglang_plugin.defaults import ADMISSION_OFF, defaults_summary, fair_unsupported
from sglang_fair.sglang_plugin.router_launch import ROUTER_OFF, router_unsupported

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_blocks_are_what_the_code_generates() -> None:
    for name in docs.FILES:
        text = (ROOT / name).read_text()
        assert docs.synced(text) == text, f"{name}: run .venv/bin/sglang-fair lab sync-docs"
    readme, serving = (" ".join((ROOT / n).read_text().split())
                       for n in ("README.md", "docs/guides/serve.md"))
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


def test_the_flags_reference_lists_every_flag_of_every_command() -> None:
    text = (ROOT / "docs" / "reference" / "flags.md").read_text()
    for name in docs.COMMANDS:
        block = text.split(f"<!-- generated: flags-{name} ")[1].split(f"<!-- end generated: flags-{name} ")[0]
        actions = docs.command_parser(name)._actions
        options = [o for a in actions for o in a.option_strings if o not in ("-h", "--help")]
        assert options and all(f"`{o}`" in block for o in options), name
    assert "| `--fair-quantum` | `0.0` | Q^u in service units" in text  # default and help in their columns
    assert "| `--router-policy` |" in text.split("flags-gateway")[1]
    assert "`--workload`" in text.split("flags-sim")[1]


@pytest.mark.parametrize("change", ["a flag added", "a help changed"])
def test_the_check_fails_when_a_flag_changes_without_regenerating(
        change: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert docs.main(["--check"]) == 0
    parser = docs.command_parser.__wrapped__("gateway")  # a parser of its own, not the cached one
    if change == "a flag added":
        parser.add_argument("--new-knob", type=int, default=3, help="a knob nobody documented")
    else:
        action = next(a for a in parser._actions if "--peer-timeout" in a.option_strings)
        action.help = "reworded: " + str(action.help)
    real = docs.command_parser
    monkeypatch.setattr(docs, "command_parser", lambda name: parser if name == "gateway" else real(name))
    assert docs.main(["--check"]) == 1
    assert "docs/reference/flags.md" in capsys.readouterr().err
