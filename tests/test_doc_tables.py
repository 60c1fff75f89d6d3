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


def test_every_method_has_a_page_with_its_options_from_its_config():
    """Each registered method (GenSco's variants share one page) has an options table, rendered
    from its config: one row per field, the default as the config has it."""
    import dataclasses

    from hopqa.methods import METHODS, method_config

    tables = _doc_tables()
    assert set(tables.OPTION_TABLES) == set(METHODS) - {"gensco-stop", "gensco-no-qd"}
    for name in tables.OPTION_TABLES:
        rows = [line for line in tables.options_table(name).splitlines()[2:]]
        fields = dataclasses.fields(method_config(name))
        assert [r.split("|")[1].strip() for r in rows] == [f"`{f.name}`" for f in fields]
    tor = tables.options_table("tor")
    assert "| `short_answer` | bool | `False` | – | – | `True` |" in tor  # its small-model preset's value
    assert "| `depth` | int | `3` | 1 – 10 | 4 |" in tor  # the range and the service's cap
