"""The paired differences the docs' prose quotes come from results (``benchmarks/doc_numbers.py``):
each is recomputed from ``docs/results/`` or listed as transcribed, so a number typed wrong, or
left behind when its run was re-run, fails here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _doc_numbers():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # as when run as a script: it imports doc_tables
    spec = importlib.util.spec_from_file_location("doc_numbers", ROOT / "benchmarks" / "doc_numbers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_numbers"] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


numbers = _doc_numbers()


def test_every_quoted_difference_is_recomputed_or_transcribed():
    missing = [q.where() for q in numbers.unexplained()]
    assert not missing, "quoted in the docs, not in the results (benchmarks/doc_numbers.py):\n" + "\n".join(missing)


def test_the_docs_quote_differences_and_most_come_from_results():
    quotes = [q for page in numbers.doc_pages() for q in numbers.quotes_in(page)]
    listed = {entry["quote"] for entry in numbers.transcribed()}
    assert len(quotes) > 100
    assert sum(q.interval not in listed for q in quotes) > 0.8 * len(quotes)


def test_a_quote_typed_wrong_is_found(tmp_path):
    diff, low, high = numbers.derivable()[0].values
    sign = lambda x: f"{x:+.3f}".replace("-", "−")  # noqa: E731
    right = f"{sign(diff)} [{sign(low)}, {sign(high)}]"
    wrong = f"{sign(diff)} [{sign(low - 0.01)}, {sign(high)}]"
    page = tmp_path / "page.md"
    page.write_text(f"F1 {right} on 30 questions.\n\nAnd {wrong}, typed wrong.\n", encoding="utf-8")
    assert [(q.line, q.text) for q in numbers.unexplained([page])] == [(3, wrong)]


def test_a_quote_with_its_p_value_and_counts_matches_only_the_comparison_that_has_them(tmp_path):
    figures = numbers.Figures((0.087, 0.003, 0.189), 0.09375, (6, 22, 2))
    page = tmp_path / "page.md"
    page.write_text("**+0.087 [+0.003, +0.189]**, p = 0.094, 6 / 22 / 2; +0.087 [+0.003, +0.189], p = 0.12;\n"
                    "+0.087 [+0.003, +0.189], 6 / 21 / 3; −0.087 [−0.189, −0.003], p = 0.09, 2 / 22 / 6\n",
                    encoding="utf-8")
    right, wrong_p, wrong_counts, mirrored = numbers.quotes_in(page)
    assert (right.p_value, right.counts, right.interval) == ("0.094", (6, 22, 2), "+0.087 [+0.003, +0.189]")
    assert right.matches(figures) and not wrong_p.matches(figures) and not wrong_counts.matches(figures)
    assert mirrored.matches(figures.mirrored()) and not mirrored.matches(figures)
    assert not right.matches(numbers.Figures((0.087, 0.003, 0.189)))  # a p-value quoted, none stored


def test_a_quote_is_read_across_a_line_break_and_rendered_tables_are_left_to_their_check(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- table: x (source: y) -->\n| a | +0.123 [−0.456, +0.789] |\n<!-- /table -->\n"
                    "F1 **+0.087 [+0.003,\n+0.189]**, and 0.380 [0.260, 0.500] is a mean, not a difference.\n",
                    encoding="utf-8")
    quotes = numbers.quotes_in(page)
    assert [(q.line, q.text, q.values, q.decimals) for q in quotes] == [(5, "+0.087 [+0.003, +0.189]", (0.087, 0.003, 0.189), 3)]
    assert quotes[0].matches(numbers.Figures((0.0874, 0.0030, 0.1893)))
    assert not quotes[0].matches(numbers.Figures((0.0874, 0.0040, 0.1893)))


def test_a_quote_is_matched_at_the_precision_it_is_written_with(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("+0.14 [+0.04, +0.26]\n", encoding="utf-8")
    quote, = numbers.quotes_in(page)
    assert quote.decimals == 2 and quote.matches(numbers.Figures((0.141, 0.044, 0.258)))
    assert not quote.matches(numbers.Figures((0.146, 0.044, 0.258)))


def test_every_transcribed_comparison_is_quoted_says_what_and_why_and_is_not_in_the_results():
    quoted = {q.interval for page in numbers.doc_pages() for q in numbers.quotes_in(page)}
    for entry in numbers.transcribed():
        assert entry["quote"] in quoted, f"listed but no longer quoted: {entry['quote']}"
        assert entry["what"] and entry["date"] and entry["why"]
        page = Path("listed.md")  # with its wins / ties / losses where the entry gives them: a pairing
        counts = entry.get("counts")  # of other runs with the same interval is not this comparison
        text = entry["quote"] + (", {} / {} / {}".format(*counts) if counts else "")
        quote, = numbers.quotes_in(page, text)
        assert not any(quote.matches(t) for t in numbers.derivable()), \
            f"{entry['quote']} is recomputed from the results: drop it from {numbers.TRANSCRIBED.name}"
