"""The house's import rules, read from the source: only the SGLang plugin imports SGLang (and the lab that
times SGLang's own scheduling policy beside the plugin's); the HTTP edge
and the ZMQ links stand below the plugin and the gateway (they import neither), and the gateway runs
without the plugin; no module imports itself through others (no import circle). Every import counts,
inside functions too, and ``importlib.import_module`` of a literal name."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "sglang_fair"
SOURCES = [*PACKAGE.rglob("*.py"), *(ROOT / "router").rglob("*.py")]
PLUGIN = PACKAGE / "sglang_plugin"
SGLANG_BENCHMARK = PACKAGE / "lab" / "plugin_speed.py"  # `lab plugin-speed`: SGLang's lpm/fcfs against ours


def imported(path: Path) -> Iterator[str]:
    """Every module name ``path`` imports (absolute; relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    top = ROOT / "python" if ROOT / "python" in path.parents else ROOT / "router"
    package = ".".join(path.relative_to(top).parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in
              ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)):
            yield str(node.args[0].value)


def importers(prefix: str, where: list[Path]) -> list[str]:
    """The files of ``where`` that import ``prefix`` or a module under it."""
    return sorted(str(p.relative_to(ROOT)) for p in where
                  if any(m == prefix or m.startswith(prefix + ".") for m in imported(p)))


def under(*folders: str) -> list[Path]:
    return [p for p in SOURCES if any(PACKAGE / f in p.parents for f in folders)]


def test_only_the_plugin_imports_sglang() -> None:
    outside = [p for p in SOURCES if PLUGIN not in p.parents and p != SGLANG_BENCHMARK]
    assert importers("sglang", outside) == []
    # the control: the scan sees the plugin's own imports of SGLang (launch, hooks, DP controller)
    seen = importers("sglang", [p for p in SOURCES if PLUGIN in p.parents])
    assert {"python/sglang_fair/sglang_plugin/launcher.py", "python/sglang_fair/sglang_plugin/hooks.py",
            "python/sglang_fair/sglang_plugin/controller_hooks.py"} <= set(seen)


@pytest.mark.parametrize("lower", ["edge", "links"])
def test_the_edge_and_the_links_stand_below_the_plugin_and_the_gateway(lower: str) -> None:
    for upper in ("sglang_fair.sglang_plugin", "sglang_fair.gateway", "fastapi", "starlette", "sglang"):
        assert importers(upper, under(lower)) == [], (lower, upper)


def test_the_gateway_does_not_need_the_plugin() -> None:
    gateway_side = under("gateway", "edge", "links", "routing", "dashboard")  # the page: the gateway's too
    assert importers("sglang_fair.sglang_plugin", gateway_side) == []
    assert importers("sglang_fair.edge", under("gateway"))  # the control: it uses the edge


def test_serving_the_gateway_loads_no_sglang() -> None:
    """At run time too: the gateway's app, the edge and the links leave ``sglang`` out of sys.modules, and
    gRPC too (the endpoint picker's, the ``epp`` extra: imported only with ``--ext-proc-port``)."""
    pytest.importorskip("fastapi")
    pytest.importorskip("grpc")  # installed, so that the check below can see it imported
    code = ("import sys, sglang_fair.gateway.launch, sglang_fair.edge.config, sglang_fair.edge.inflight, "
            "sglang_fair.edge.admins, sglang_fair.links.feedback_hub, sglang_fair.dashboard.gateway_page; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sglang', 'grpc')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def module_of(path: Path) -> str:
    top = ROOT / "python" if ROOT / "python" in path.parents else ROOT / "router"
    parts = path.relative_to(top).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> the modules it imports): its strongly connected
    components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            step = next((e for e in edges if e in graph), None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                member, component = "", []
                while member != node:
                    member = stack.pop()
                    component.append(member)
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (every import counts, ``TYPE_CHECKING`` and
    function-level ones too). A package's face (``__init__``) is the package; a module's import of its
    own package's face is left out (the face hands on the names its modules define)."""
    modules = {module_of(p): p for p in SOURCES}
    return {name: {m for m in imported(path) if m in modules and m != name and not name.startswith(m + ".")}
            for name, path in modules.items()}


def test_no_module_imports_itself_through_others() -> None:
    graph = import_graph()
    assert circles(graph) == []
    # the control: the gateway's circle before its page and picker moved out of app.py is one
    app, front = "sglang_fair.gateway.app", "sglang_fair.gateway.front"
    old = {**graph, app: graph[app] | {front}}
    assert any({app, front} <= set(c) for c in circles(old))
