"""Every relative link in README.md, router/README.md, results/README.md and docs/**/*.md (every
folder) resolves: the file exists and, for a link with #anchor into a Markdown file, the anchor is one of
that file's headings (GitHub's slugs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def slug(heading: str) -> str:
    text = re.sub(r"<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)  # GitHub keeps letters, digits, _, - and spaces
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


DOCS = [ROOT / "README.md", ROOT / "router" / "README.md", ROOT / "results" / "README.md",
        *sorted((ROOT / "docs").rglob("*.md"))]


def broken_links(doc: Path, root: Path = ROOT) -> list[str]:
    bad = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{doc.relative_to(root)}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{doc.relative_to(root)}: {target}: no such heading")
    return bad


def test_every_relative_link_resolves() -> None:
    assert len(DOCS) > 10
    assert [bad for doc in DOCS for bad in broken_links(doc)] == []


def test_the_check_finds_a_broken_link_and_anchor(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title here\n")
    doc.write_text("[ok](b.md#title-here) [gone](c.md) [no](b.md#other)\n")
    assert broken_links(doc, tmp_path) == ["a.md: c.md: no such file", "a.md: b.md#other: no such heading"]
