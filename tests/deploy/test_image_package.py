"""Each image installs a complete package: the wheel built from exactly the files its Dockerfile copies,
installed alone into a clean interpreter (the standard library, that wheel, its base dependencies, no
SGLang), imports every module of ``sglang_fair`` and ``sglang_fair_router`` (a superset of what
``sglang-fair serve`` loads with one worker and with ``--dp-size N --load-balance-method d2lpm``: the
launcher, the plugin's hooks, the router process), resolves every project import written inside them,
loads its entry points and builds the CLI with ``serve`` and ``router``. No docker engine, no network.

Negative control: the Dockerfile of before this test (no ``router/``) must fail it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deploy_support import (
    DOCKERFILES,
    ROOT,
    build_wheel_from,
    clean_env,
    context_files,
    ignore_patterns,
    parse,
)

# what `serve` imports in each mode, named so a report that skipped them cannot pass
SERVE_MODULES = (
    "sglang_fair.cli", "sglang_fair.sglang_plugin.cli", "sglang_fair.sglang_plugin.launcher",
    "sglang_fair.sglang_plugin.hooks", "sglang_fair.sglang_plugin.scheduler_hooks",
    "sglang_fair.sglang_plugin.http_hooks",
    # data parallel with the router: SGLang-side adapters and the router process
    "sglang_fair.sglang_plugin.router_launch", "sglang_fair.sglang_plugin.controller_hooks",
    "sglang_fair.sglang_plugin.worker_hooks", "sglang_fair.sglang_plugin.evictions",
    "sglang_fair_router.cli", "sglang_fair_router.service", "sglang_fair_router.http",
)

OLD_DOCKERFILE = """
FROM lmsysorg/sglang:v0.5.23
WORKDIR /opt/sglang-fair
COPY pyproject.toml README.md ./
COPY python ./python
COPY scripts ./scripts
RUN pip install --no-cache-dir --no-deps .
"""


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_image_installs_a_complete_package(dockerfile: Path, tmp_path: Path) -> None:
    wheel = build_wheel_from(dockerfile.read_text(), tmp_path)
    env = clean_env(wheel, tmp_path)
    report = env.selfcheck()
    assert report["problems"] == [] and report["returncode"] == 0, report["problems"]
    locations = report["locations"]
    assert isinstance(locations, dict)
    assert {k: Path(v).parent for k, v in locations.items()} == {
        "sglang_fair": env.site, "sglang_fair_router": env.site}  # from the wheel, not a checkout
    modules = report["modules"]
    assert isinstance(modules, list)
    assert set(SERVE_MODULES) <= set(modules)
    needs = report["needs_extra"]
    assert isinstance(needs, dict)
    assert set(needs) <= {"bench", "gateway", "epp"}, needs  # the load generator, the gateway, its picker
    for argv in (["serve", "--help"], ["router", "--help"]):
        done = env.console_script(*argv)
        assert done.returncode == 0, done.stderr[-2000:]


def test_wheel_ships_every_source_module(tmp_path: Path) -> None:
    """A subpackage without ``__init__.py`` would be dropped by package discovery: compare file sets."""
    import zipfile

    wheel = build_wheel_from((ROOT / "docker" / "Dockerfile").read_text(), tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    shipped = {n for n in names if n.endswith(".py")}
    patterns = ignore_patterns()
    sources = {str(p.relative_to(top)) for top in ("python", "router")
               for p in context_files(top, patterns) if p.suffix == ".py"}
    assert shipped == sources
    epp = ROOT / "python" / "sglang_fair" / "gateway" / "epp"  # the picker's descriptor set and its protos
    data = {str(p.relative_to(ROOT / "python")) for p in [epp / "ext_proc.binpb", *epp.glob("protos/**/*")]
            if p.is_file()}
    assert data <= names, data - names


def test_every_copy_source_exists() -> None:
    for dockerfile in DOCKERFILES:
        for stage in parse(dockerfile.read_text()):
            for copy in stage.copies:
                if copy.stage_from is None:
                    for source in copy.sources:
                        assert (ROOT / source).exists(), f"{dockerfile.name}: COPY {source}"


def test_negative_control_image_without_router_fails(tmp_path: Path) -> None:
    """The image of before (python/ and scripts/, no router/): the check names what is missing, and
    the command line refuses to start instead of quietly dropping the router subcommand."""
    env = clean_env(build_wheel_from(OLD_DOCKERFILE, tmp_path), tmp_path)
    report = env.selfcheck()
    assert report["returncode"] == 1
    problems = report["problems"]
    assert isinstance(problems, list)
    assert any("sglang_fair_router" in p for p in problems), problems
    done = env.console_script("serve", "--help")
    assert done.returncode == 1
    assert "incomplete" in done.stderr and "sglang_fair_router" in done.stderr, done.stderr[-2000:]
