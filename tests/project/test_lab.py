"""``sglang-fair lab``: every registered lab imports and answers ``--help`` with exit 0; every module of the
lab package and every experiment with a ``main`` is registered (a new one cannot be forgotten); the list
names every lab; an unknown name is an error with the list and exit 2, through both entries."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import sglang_fair.experiments
import sglang_fair.lab
from sglang_fair.cli import main as cli_main
from sglang_fair.lab.registry import GROUPS, LABS, listing, run

ROOT = Path(__file__).resolve().parents[2]
NOT_LABS = {"registry", "cli", "__main__"}  # the lab package's own plumbing


def modules_of(package: object) -> set[str]:
    return {m.name for m in pkgutil.iter_modules(package.__path__)}  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", [lab.name for lab in LABS])
def test_every_lab_answers_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(name, ["--help"])
    assert exit_.value.code == 0
    assert f"usage: sglang-fair lab {name}" in capsys.readouterr().out


def test_every_lab_module_and_experiment_is_registered() -> None:
    registered = {lab.module for lab in LABS}
    lab_modules = {f"sglang_fair.lab.{m}" for m in modules_of(sglang_fair.lab) - NOT_LABS}
    experiments_dir = Path(sglang_fair.experiments.__path__[0])
    runnable = {f"sglang_fair.experiments.{m}" for m in modules_of(sglang_fair.experiments)
                if "\ndef main(" in (experiments_dir / f"{m}.py").read_text()}
    assert len(runnable) >= 9 and len(lab_modules) >= 20  # the control: the scan finds them
    assert lab_modules | runnable == registered, (lab_modules | runnable) ^ registered
    assert len({lab.name for lab in LABS}) == len(LABS) and {lab.group for lab in LABS} == set(GROUPS)


def test_the_list_and_the_docs_name_every_lab(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["lab"]) == 0 and cli_main(["lab", "--list"]) == 0
    out = capsys.readouterr().out
    doc = (ROOT / "docs" / "reference" / "lab.md").read_text()
    for lab in LABS:
        assert f"  {lab.name}  " in out and lab.summary in listing()
        assert f"`{lab.name}`" in doc, f"docs/reference/lab.md does not name the lab {lab.name}"


def test_lab_help_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli_main(["lab", "sync-docs", "--help"])
    assert exit_.value.code == 0 and "--check" in capsys.readouterr().out


def test_an_unknown_lab_is_an_error_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["lab", "no-such-lab"]) == 2
    err = capsys.readouterr().err
    assert "no lab named 'no-such-lab'" in err and "gateway-speed" in err


def test_the_probes_run_on_the_standard_library_alone() -> None:
    """``python3 -m sglang_fair.lab`` as docker_check.sh runs it, on any host python3: no site-packages
    (``-S``), only the package's source on the path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    for probe in ("docker-probe", "fleet-probe", "monitoring-probe"):
        ok = subprocess.run([sys.executable, "-S", "-m", "sglang_fair.lab", probe, "--help"],
                            capture_output=True, text=True, env=env, timeout=60)
        assert ok.returncode == 0 and f"usage: sglang-fair lab {probe}" in ok.stdout, ok.stderr
    bad = subprocess.run([sys.executable, "-S", "-m", "sglang_fair.lab", "docker-prob"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "no lab named 'docker-prob'" in bad.stderr and "chaos" in bad.stderr
