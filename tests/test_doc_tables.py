"""The docs' measured tables are rendered from results (``benchmarks/doc_tables.py``): each
marked table equals what its renderer makes of the stored runs, so a table that no longer
matches them fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _doc_tables():
    spec = importlib.util.spec_from_file_location("doc_tables", ROOT / "benchmarks" / "doc_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_marked_table_matches_its_results():
    tables = _doc_tables()
    pages = tables.pages()
    assert pages, "no docs page marks a table"
    names = [m.group("name") for p in pages for m in tables.MARKED.finditer(p.read_text(encoding="utf-8"))]
    assert set(names) == set(tables.TABLES)  # every renderer is used, every marked table has one
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert tables.render(text) == text, f"{page.relative_to(ROOT)}: run benchmarks/doc_tables.py --write"


def test_a_changed_figure_is_found():
    tables = _doc_tables()
    page = next(p for p in tables.pages() if "intervals-comparisons" in p.read_text(encoding="utf-8"))
    text = page.read_text(encoding="utf-8")
    edited = text.replace("| ircot (free text), F1 | +0.141", "| ircot (free text), F1 | +0.142", 1)
    assert edited != text and tables.render(edited) == text
