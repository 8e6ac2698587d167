"""Fixtures shared by the test folders."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest


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
