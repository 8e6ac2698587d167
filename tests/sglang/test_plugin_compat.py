"""Compatibility of the plugin with the pinned SGLang: every hooked name and signature must exist.

Fails loudly, naming the symbol, if SGLang moved or renamed anything the plugin relies on.
Skipped only when SGLang is not installed at all (the base install).
"""

from __future__ import annotations

import inspect
import os
import pkgutil
import subprocess
import sys
import typing

import pytest

pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")

from sglang_fair.sglang_plugin.hooks import HOOKS, SGLANG_VERSION, USED_NAMES, Hook


def _resolve(name: str) -> object:
    try:
        return pkgutil.resolve_name(name)
    except (ImportError, AttributeError) as err:
        pytest.fail(f"SGLang {SGLANG_VERSION}: hooked/used symbol {name} is missing: {err}")


def test_pinned_version() -> None:
    import sglang

    assert sglang.__version__ == SGLANG_VERSION, f"plugin is tested against SGLang {SGLANG_VERSION}"


@pytest.mark.parametrize("hook", HOOKS, ids=[h.target.rsplit(".", 2)[-1] for h in HOOKS])
def test_hooked_symbol_and_signature(hook: Hook) -> None:
    target = _resolve(hook.target)
    assert callable(target), f"{hook.target} is not callable"
    params = list(inspect.signature(target).parameters)
    for name in hook.params:
        assert name in params, f"SGLang {SGLANG_VERSION}: {hook.target} lacks parameter {name!r}: {params}"


@pytest.mark.parametrize("name", USED_NAMES)
def test_used_symbol_exists(name: str) -> None:
    _resolve(name)


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
