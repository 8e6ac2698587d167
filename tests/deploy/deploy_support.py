"""What the images would contain, without a docker engine: the Dockerfiles' COPY sets, the wheel built
from exactly those files, and a clean interpreter that sees only that wheel and its base dependencies."""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILES = sorted(DOCKER.glob("Dockerfile*"))


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]
    dest: str  # absolute, WORKDIR applied
    stage_from: str | None  # COPY --from=...: not from the build context


@dataclass
class Stage:
    name: str
    copies: list[Copy] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            word, _, rest = full.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def parse(text: str) -> list[Stage]:
    """Stages with their COPY instructions (shell form; flags --from/--chown/--chmod/--link)."""
    stages: list[Stage] = []
    workdir = "/"
    for word, rest in instructions(text):
        if word == "FROM":
            parts = rest.split()
            named = len(parts) > 2 and parts[1].upper() == "AS"
            stages.append(Stage(parts[2] if named else str(len(stages))))
            workdir = "/"
        elif word == "WORKDIR":
            workdir = str(PurePosixPath(workdir) / rest)
        elif word in ("COPY", "ADD"):
            args = shlex.split(rest)
            flags = {a.split("=", 1)[0]: a.partition("=")[2] for a in args if a.startswith("--")}
            paths = [a for a in args if not a.startswith("--")]
            *sources, dest = paths
            absolute = str(PurePosixPath(workdir) / dest) + ("/" if dest.endswith("/") or dest == "." else "")
            stages[-1].copies.append(Copy(tuple(sources), absolute, flags.get("--from")))
    return stages


def ignore_patterns() -> list[re.Pattern[str]]:
    """The build context's .dockerignore as regexes (`**`, `*`, `?`; `!` exceptions are refused)."""
    path = ROOT / ".dockerignore"
    lines = [x.strip() for x in path.read_text().splitlines()] if path.exists() else []
    pats = [x for x in lines if x and not x.startswith("#")]
    assert not [p for p in pats if p.startswith("!")], "teach deploy_support.ignore_patterns '!' lines"
    out = []
    for p in pats:
        rx = re.escape(p.strip("/")).replace(r"\*\*", "\0").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        out.append(re.compile(rx.replace("\0", ".*") + "$"))
    return out


def ignored(rel: PurePosixPath, patterns: list[re.Pattern[str]]) -> bool:
    """Docker leaves out a path if it or any of its parent directories matches."""
    parts = rel.parts
    return any(p.match("/".join(parts[:i])) for i in range(1, len(parts) + 1) for p in patterns)


def context_files(source: str, patterns: list[re.Pattern[str]]) -> list[PurePosixPath]:
    """The files under ``source`` (context-relative) that docker would send."""
    base = ROOT / source
    assert base.exists(), f"COPY source {source} does not exist in the build context"
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    rels = [PurePosixPath(p.relative_to(ROOT).as_posix()) for p in files]
    return [r for r in rels if not ignored(r, patterns)]


def stage_tree(stage: Stage, into: Path) -> None:
    """Lay out, under ``into`` as the stage's filesystem root, what its context COPYs put there."""
    patterns = ignore_patterns()
    for copy in stage.copies:
        if copy.stage_from is not None:
            continue
        to_dir = copy.dest.endswith("/") or len(copy.sources) > 1
        for source in copy.sources:
            src = ROOT / source
            for rel in context_files(source, patterns):
                if src.is_dir():
                    target = PurePosixPath(copy.dest) / rel.relative_to(source)
                else:
                    target = PurePosixPath(copy.dest) / rel.name if to_dir else PurePosixPath(copy.dest)
                out = into / str(target).lstrip("/")
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ROOT / rel, out)


def build_wheel_from(text: str, tmp: Path) -> Path:
    """The wheel built (PEP 517, setuptools, no network) in the stage whose COPYs bring pyproject.toml."""
    for stage in parse(text):
        root = tmp / f"stage-{stage.name}"
        stage_tree(stage, root)
        found = sorted(root.rglob("pyproject.toml"))
        if found:
            dist = tmp / "dist"
            code = f"import setuptools.build_meta as b; print(b.build_wheel({str(dist)!r}))"
            done = subprocess.run([sys.executable, "-c", code], cwd=found[0].parent,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-3000:]
            assert "deprecat" not in done.stderr.lower(), done.stderr[-3000:]  # a quiet, future-proof build
            return dist / done.stdout.strip().splitlines()[-1]
    raise AssertionError("no stage COPYs pyproject.toml: the image cannot build the package")


def base_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    reqs = [x.split(":", 1)[1].strip() for x in lines if x.startswith("Requires-Dist:")]
    return [re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in reqs if ";" not in r]  # type: ignore[union-attr]


def link_distribution(name: str, into: Path, seen: set[str]) -> None:
    """Symlink an installed distribution (and its unconditional requirements) into ``into``."""
    dist = md.distribution(name)
    key = dist.metadata["Name"].lower()
    if key in seen:
        return
    seen.add(key)
    for top in {Path(str(f)).parts[0] for f in dist.files or ()}:
        src, dst = Path(str(dist.locate_file(top))), into / top
        if src.exists() and not dst.exists() and not top.startswith(".."):
            dst.symlink_to(src)
    for req in dist.requires or ():
        if ";" not in req:
            link_distribution(re.match(r"[A-Za-z0-9._-]+", req).group(0), into, seen)  # type: ignore[union-attr]


@dataclass(frozen=True)
class CleanEnv:
    """An interpreter run with -I -S: the standard library, the unpacked wheel, its base dependencies."""

    site: Path
    deps: Path

    def run(self, code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        prelude = f"import sys; sys.path[:0] = [{str(self.site)!r}, {str(self.deps)!r}]\n"
        return subprocess.run([sys.executable, "-I", "-S", "-c", prelude + code],
                              capture_output=True, text=True, timeout=timeout, cwd=self.site)

    def selfcheck(self) -> dict[str, object]:
        done = self.run("from sglang_fair.selfcheck import main; raise SystemExit(main(['--json']))")
        assert done.stdout.strip(), done.stderr[-3000:]
        report: dict[str, object] = json.loads(done.stdout)
        report["returncode"] = done.returncode
        return report

    def console_script(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """The wheel's ``sglang-fair`` console script, found through its entry point metadata."""
        code = ("from importlib.metadata import entry_points\n"
                "(ep,) = [e for e in entry_points(group='console_scripts') if e.name == 'sglang-fair']\n"
                f"sys.argv = ['sglang-fair', *{list(argv)!r}]\n"
                "raise SystemExit(ep.load()())")
        return self.run(code)


def clean_env(wheel: Path, tmp: Path) -> CleanEnv:
    site, deps = tmp / "site", tmp / "deps"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    deps.mkdir()
    seen: set[str] = set()
    for name in base_requirements(wheel):
        link_distribution(name, deps, seen)
    return CleanEnv(site, deps)

