"""Is this installation of sglang-fair complete?  ``python -m sglang_fair.selfcheck [--sglang] [--json]``

Run by the Docker images right after they install the wheel, and by ``tests/deploy`` on a wheel built
from exactly the files each Dockerfile copies. Checks, with one line per problem and exit code 1 if any:

1. every module of the packages the distribution ships (``sglang_fair``, ``sglang_fair_router``)
   imports. A module that fails only because a dependency of an optional extra is absent (``aiohttp``
   of ``bench``) is listed under that extra instead, unless ``--require-extras`` names the extra;
2. every ``sglang_fair``/``sglang_fair_router`` import written in those modules, the ones inside
   functions too (SGLang's processes make them lazily), names a module or name that exists;
3. the entry points load: the ``sglang-fair`` console script and the SGLang plugin ``sglang_fair``;
4. the command line builds with every subcommand (a missing one is an error, not a gap), and the
   router command that ``serve --dp-size N --load-balance-method d2lpm`` starts parses;
5. with ``--sglang``: the installed SGLang is the pinned version with every name the plugin hooks
   (``sglang_plugin.fence``; imports SGLang's scheduler, seconds to tens of seconds).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata as md
import importlib.util
import json
import pkgutil
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType

DIST = "sglang-fair"
PACKAGES = ("sglang_fair", "sglang_fair_router")
CONSOLE_SCRIPT = "sglang-fair"
PLUGIN = ("sglang.srt.plugins", "sglang_fair")
DISTRIBUTION_OF = {"grpc": "grpcio", "google": "protobuf"}  # import names that are not their package's


@dataclass
class Report:
    locations: dict[str, str] = field(default_factory=dict)
    modules: list[str] = field(default_factory=list)
    needs_extra: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def extra_requirements(dist: md.Distribution) -> dict[str, str]:
    """Normalized requirement name -> the optional extra that brings it."""
    found: dict[str, str] = {}
    for req in dist.requires or ():
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        name = re.match(r"[A-Za-z0-9._-]+", req)
        if extra and name:
            found.setdefault(_norm(name.group(0)), extra.group(1))
    return found


def walk(report: Report, extras: dict[str, str], required: set[str]) -> list[ModuleType]:
    """Import every module of :data:`PACKAGES`; return the ones that imported."""
    loaded: list[ModuleType] = []
    for top in PACKAGES:
        names = [top]
        try:
            pkg = importlib.import_module(top)
        except ImportError as err:
            report.problems.append(f"package {top} does not import: {err}")
            continue
        report.locations[top] = str(next(iter(pkg.__path__)))
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, top + ".", onerror=lambda _: None)
                  if not m.name.endswith(".__main__")]
        for name in names:
            try:
                loaded.append(importlib.import_module(name))
                report.modules.append(name)
            except ModuleNotFoundError as err:
                top = (err.name or "").split(".")[0]
                extra = extras.get(_norm(DISTRIBUTION_OF.get(top, top)))
                if extra is not None and extra not in required:
                    report.needs_extra.setdefault(extra, []).append(name)
                else:
                    report.problems.append(f"{name} does not import: {err}")
            except Exception as err:  # any import-time failure is a broken install
                report.problems.append(f"{name} does not import: {type(err).__name__}: {err}")
    return loaded


def project_imports(module: ModuleType) -> Iterator[tuple[str, str | None]]:
    """(module, imported name or None) for every import of :data:`PACKAGES` in ``module``'s source."""
    origin = getattr(module, "__file__", None)
    if not origin or not origin.endswith(".py"):
        return
    with open(origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), origin)
    package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names if a.name.split(".")[0] in PACKAGES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            if base.split(".")[0] in PACKAGES:
                yield from ((base, a.name) for a in node.names)


def _resolves(target: str, name: str | None) -> str | None:
    """None if ``from target import name`` (or ``import target``) can work, else why not."""
    try:
        if importlib.util.find_spec(target) is None:
            return f"no module {target}"
    except ImportError as err:
        return str(err)
    module = sys.modules.get(target)
    if name is None or (module is not None and hasattr(module, name)):
        return None
    if module is not None and not hasattr(module, "__path__"):
        return f"{target} has no {name}"
    try:
        return None if importlib.util.find_spec(f"{target}.{name}") is not None else f"no {target}.{name}"
    except ImportError as err:
        return str(err)


def check_imports(report: Report, loaded: list[ModuleType]) -> None:
    """Every project import written in a loaded module resolves (item 2 of the docstring)."""
    extra_only = {m for names in report.needs_extra.values() for m in names}  # they exist; cannot load
    for module in loaded:
        for target, name in project_imports(module):
            if target in extra_only or f"{target}.{name}" in extra_only:
                continue
            why = _resolves(target, name)
            if why is not None:
                imported = f"{target}.{name}" if name else target
                report.problems.append(f"{module.__name__} imports {imported}: {why}")


def check_entry_points(report: Report, dist: md.Distribution) -> None:
    wanted = {("console_scripts", CONSOLE_SCRIPT), PLUGIN}
    for ep in dist.entry_points:
        wanted.discard((ep.group, ep.name))
        if ep.group in ("console_scripts", PLUGIN[0]):
            try:
                ep.load()
            except Exception as err:
                report.problems.append(f"entry point {ep.group}:{ep.name} = {ep.value} does not load: {err}")
    report.problems += [f"entry point {group}:{name} is not declared" for group, name in sorted(wanted)]


def check_cli(report: Report) -> None:
    """The parser builds, ``serve`` takes the DP flags, and the router command it would start parses."""
    from sglang_fair.cli import IncompleteInstall, build_parser

    try:
        parser = build_parser()
    except IncompleteInstall as err:
        report.problems.append(str(err))
        return
    from sglang_fair.core.cost import CostModel
    from sglang_fair.sglang_plugin.router_launch import plan_router
    from sglang_fair.sglang_plugin.router_link import RouterLink, RouterSettings, router_command

    serve = ["serve", "--model-path", "m", "--dp-size", "2", "--load-balance-method", "d2lpm"]
    args, extra = parser.parse_known_args(serve)
    plan = plan_router(extra)
    if args.command != "serve" or plan.policy != "d2lpm":
        report.problems.append(f"serve does not plan the d2lpm router (got {plan.policy})")
    router = router_command(RouterLink("/nonexistent", 2), "d2lpm", RouterSettings(), CostModel())
    if parser.parse_args(router).command != "router":
        report.problems.append("the router command that serve starts does not parse")


def run(sglang: bool = False, required: Sequence[str] = ()) -> Report:
    report = Report()
    try:
        dist = md.distribution(DIST)
    except md.PackageNotFoundError:
        report.problems.append(f"distribution {DIST} is not installed (no metadata on sys.path)")
        return report
    loaded = walk(report, extra_requirements(dist), set(required))
    check_imports(report, loaded)
    check_entry_points(report, dist)
    if not report.problems:
        check_cli(report)
    if sglang:
        from sglang_fair.sglang_plugin.fence import problems

        report.problems += problems()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sglang_fair.selfcheck",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", action="store_true", help="also check the installed SGLang (fence)")
    parser.add_argument("--require-extras", default="", help="comma-separated extras that must import too")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run(args.sglang, [x for x in args.require_extras.split(",") if x])
    if args.json:
        print(json.dumps(report.__dict__, indent=1))
    else:
        where = ", ".join(f"{k} from {v}" for k, v in report.locations.items())
        print(f"sglang-fair selfcheck: {len(report.modules)} modules imported ({where})")
        for extra, names in sorted(report.needs_extra.items()):
            print(f"  needs the {extra} extra: {', '.join(names)}")
        for problem in report.problems:
            print(f"  PROBLEM: {problem}")
        print("ok" if not report.problems else f"{len(report.problems)} problem(s)")
    return 1 if report.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
