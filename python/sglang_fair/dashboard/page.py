"""The page both fronts serve: ``GET /fairness/ui`` (one HTML file, ``page.html``, with its script and
style inline: nothing fetched from elsewhere) and the path of its data, ``GET /fairness/ui/data``
(:mod:`model`; ``serve``'s in ``sglang_plugin/fairness_page.py``, the gateway's in ``gateway_page.py``)."""

from __future__ import annotations

from pathlib import Path

PAGE_PATH, DATA_PATH = "/fairness/ui", "/fairness/ui/data"
NO_STORE = {"cache-control": "no-store"}


def page_html() -> bytes:
    """The page's HTML."""
    return (Path(__file__).with_name("page.html")).read_bytes()
