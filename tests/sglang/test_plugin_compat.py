"""Compatibility of the plugin with the pinned SGLang: every hooked name and signature must exist.

Fails loudly, naming the symbol, if SGLang moved or renamed anything the plugin relies on.
Skipped only when SGLang is not installed at all (the base install).
"""

from __future__ import annotations

import os
import subprocess
import sys
import typing

import pytest

pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")

from sglang_fair.sglang_plugin import fence
from sglang_fair.sglang_plugin.hooks import ATTRIBUTES, HOOKS, SGLANG_VERSION, USED_NAMES, Hook, M

pytestmark = pytest.mark.sglang


def test_pinned_version() -> None:
    import sglang

    assert sglang.__version__ == SGLANG_VERSION, f"plugin is tested against SGLang {SGLANG_VERSION}"


@pytest.mark.parametrize("hook", HOOKS, ids=[h.target.rsplit(".", 2)[-1] for h in HOOKS])
def test_hooked_symbol_and_signature(hook: Hook) -> None:
    assert fence.problems(SGLANG_VERSION, [(hook.target, hook.params)], [], []) == []


@pytest.mark.parametrize("name", USED_NAMES)
def test_used_symbol_exists(name: str) -> None:
    assert fence.problems(SGLANG_VERSION, [], [name], []) == []


@pytest.mark.parametrize(("cls", "attrs"), ATTRIBUTES, ids=[c.rsplit(".", 1)[-1] for c, _ in ATTRIBUTES])
def test_attributes_read_on_sglang_objects_exist(cls: str, attrs: tuple[str, ...]) -> None:
    assert fence.problems(SGLANG_VERSION, [], [], [(cls, attrs)]) == []


def test_the_fence_names_every_kind_of_move() -> None:
    """What an upgrade of SGLang could break, each named in the one message that stops the plugin."""
    moved = fence.problems(
        "0.6.0",
        hooks=[(HOOKS[0].target, ("self", "policy", "no_such_param")), (M + "scheduler.Scheduler.gone", ())],
        used=["sglang.srt.managers.no_such_module.Thing"],
        attributes=[(M + "schedule_policy.PrefillAdder", ("can_run_list", "no_such_attribute"))],
    )
    assert len(moved) == 5, moved
    named = ("SGLang 0.6.0 is installed", "lacks parameter 'no_such_param'", "Scheduler.gone is missing",
             "no_such_module.Thing is missing", "PrefillAdder no longer sets .no_such_attribute")
    for expected in named:
        assert any(expected in line for line in moved), (expected, moved)


def test_load_refuses_to_hook_a_moved_sglang(monkeypatch: pytest.MonkeyPatch) -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry

    import sglang
    from sglang_fair.sglang_plugin import launcher, load

    monkeypatch.delenv(fence.ENV_CHECKED, raising=False)
    monkeypatch.setattr(sglang, "__version__", "0.6.0")
    before = {target: list(hooks) for target, hooks in HookRegistry._hooks.items()}
    with pytest.raises(fence.SGLangMoved, match=r"SGLang 0\.6\.0 is installed"):
        load()
    assert {target: list(hooks) for target, hooks in HookRegistry._hooks.items()} == before  # nothing hooked
    with pytest.raises(fence.SGLangMoved, match="will not hook"):  # sglang-fair serve: message, exit 2
        launcher._load_plugins_or_fail()


def test_schedule_policy_choices_are_a_list_we_can_extend() -> None:
    from sglang.srt.arg_groups.fields.schedule import Schedule

    hint = typing.get_type_hints(Schedule, include_extras=True)["schedule_policy"]
    choices = hint.__metadata__[0].choices
    assert isinstance(choices, list) and "lpm" in choices and "dlpm" not in choices


CHECK_LOAD = """
import os, sys
from sglang.srt.plugins import load_plugins
from sglang.srt.plugins.hook_registry import HookRegistry
from sglang.srt.server_args import prepare_server_args
from sglang_fair.sglang_plugin.hooks import HOOKS
load_plugins()
missing = [h.target for h in HOOKS if h.target not in HookRegistry._patched]
print("missing hooks:", missing, flush=True)
args = prepare_server_args(["--model-path", "m", "--device", "cpu", "--schedule-policy", sys.argv[1]])
print("policy", args.schedule_policy)
"""


def _load(plugins: str, policy: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SGLANG_PLUGINS=plugins, SGLANG_USE_CPU_ENGINE="1")
    return subprocess.run(
        [sys.executable, "-c", CHECK_LOAD, policy], env=env, capture_output=True, text=True, timeout=300
    )


def test_entry_point_loads_through_sglang_plugins_whitelist() -> None:
    done = _load("sglang_fair", "dlpm")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "missing hooks: []" in done.stdout
    assert "policy dlpm" in done.stdout


def test_without_the_plugin_sglang_rejects_dlpm() -> None:
    done = _load("some_other_plugin", "dlpm")
    assert done.returncode != 0
    assert "invalid choice: 'dlpm'" in done.stderr
