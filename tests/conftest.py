"""Fixtures and markers shared by the test folders (the markers are registered in pyproject.toml):
``sglang`` (needs SGLang; skipped without it), ``e2e`` (starts real servers), ``timers`` (run as on a
freshly booted machine by scripts/test_fresh_boot.sh)."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Iterator

import pytest

SGLANG_MISSING = pytest.mark.skip(reason="SGLang not installed (scripts/install_sglang_cpu.sh)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked ``sglang`` where SGLang is not installed."""
    if importlib.util.find_spec("sglang") is not None:
        return
    for item in items:
        if item.get_closest_marker("sglang") is not None:
            item.add_marker(SGLANG_MISSING)


@pytest.fixture(scope="module")
def sglang_parser() -> Iterator[argparse.ArgumentParser]:
    """SGLang's parser with the plugin's policy names; SGLang's annotations are restored afterwards
    (other tests check that SGLang alone rejects them)."""
    pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
    from sglang.srt.arg_groups.fields.schedule import Schedule
    from sglang.srt.server_args import ServerArgs

    from sglang_fair.sglang_plugin.hooks import extend_schedule_policy_choices

    saved = {cls: cls.__annotations__["schedule_policy"] for cls in (Schedule, ServerArgs)}
    try:
        extend_schedule_policy_choices()  # what the plugin does before SGLang parses
        parser = argparse.ArgumentParser(exit_on_error=False)
        ServerArgs.add_cli_args(parser)
        yield parser
    finally:
        for cls, hint in saved.items():
            cls.__annotations__["schedule_policy"] = hint
