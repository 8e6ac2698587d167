"""Check that every relative link in README.md, router/README.md, results/README.md and docs/*.md
resolves: the file exists and, for a link with #anchor into a Markdown file, the anchor is one of that
file's headings (GitHub's slugs).
Also fails on any mention of ``../shared`` or ``shared/``. Run from the repository root:
``python docs/check_links.py``; exit status 1 lists what is broken."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def main() -> int:
    docs = [ROOT / "README.md", ROOT / "router" / "README.md", ROOT / "results" / "README.md",
            *sorted((ROOT / "docs").glob("*.md"))]
    bad = []
    for doc in docs:
        text = doc.read_text()
        if re.search(r"\.\./shared|(?<![\w.-])shared/", text):
            bad.append(f"{doc.relative_to(ROOT)}: mentions ../shared or shared/")
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                bad.append(f"{doc.relative_to(ROOT)}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{doc.relative_to(ROOT)}: {target}: no such heading")
    print("\n".join(bad) or f"{len(docs)} documents: every relative link resolves")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
