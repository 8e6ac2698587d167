"""A broken install is reported, not papered over: the CLI refuses to start when a subcommand's module
is missing, and the self-check finds a project import that names nothing (also one inside a function)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sglang_fair import cli, selfcheck


def test_missing_subcommand_module_fails_loudly(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, "sglang_fair_nonexistent.cli"))
    with pytest.raises(cli.IncompleteInstall, match=r"sglang_fair_nonexistent\.cli"):
        cli.build_parser()
    assert cli.main(["sim", "--help"]) == 1
    err = capsys.readouterr().err
    assert "incomplete" in err and "No module named 'sglang_fair_nonexistent'" in err


def test_complete_install_builds_every_subcommand() -> None:
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    assert {"serve", "router", "sim", "bench", "demo", "gateway"} <= set(sub.choices or {})


def _module(tmp_path: Path, source: str) -> object:
    path = tmp_path / "probe.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("probe", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("source", "expected"), [
    ("def f():\n    from sglang_fair_router import no_such_module\n", "sglang_fair_router.no_such_module"),
    ("def f():\n    import sglang_fair.no_such_package.x\n", "No module named 'sglang_fair.no_such_package'"),
    ("from sglang_fair.core.cost import CostModel\ndef f():\n    from sglang_fair.core.cost import Nope\n",
     "sglang_fair.core.cost has no Nope"),
])
def test_selfcheck_finds_a_lazy_import_that_names_nothing(tmp_path: Path, source: str, expected: str) -> None:
    report = selfcheck.Report()
    selfcheck.check_imports(report, [_module(tmp_path, source)])  # type: ignore[list-item]
    assert len(report.problems) == 1 and expected in report.problems[0], report.problems


def test_selfcheck_accepts_imports_that_resolve(tmp_path: Path) -> None:
    source = ("from sglang_fair.core.cost import CostModel\n"
              "def f():\n    from sglang_fair_router import service\n    import sglang_fair.sim.cli\n")
    report = selfcheck.Report()
    selfcheck.check_imports(report, [_module(tmp_path, source)])  # type: ignore[list-item]
    assert report.problems == []
