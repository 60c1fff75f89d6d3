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


# -- F1 figures quoted on their own ---------------------------------------------------------------
def test_every_quoted_f1_is_recomputed_or_transcribed():
    missing = [q.where() for q in numbers.unexplained_f1()]
    assert not missing, "F1 quoted in the docs, not in the results (benchmarks/doc_numbers.py):\n" + "\n".join(missing)


def test_the_docs_quote_f1_figures_and_most_come_from_results():
    quotes = [q for page in numbers.doc_pages() for q in numbers.f1_quotes_in(page)]
    listed = {entry["quote"] for entry in numbers.transcribed_f1()}
    assert len(quotes) > 100
    assert sum(q.text not in listed for q in quotes) > 0.9 * len(quotes)


def test_an_f1_is_read_as_written_and_rendered_tables_and_differences_are_left_out(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- table: x (source: y) -->\n| F1 0.999 |\n<!-- /table -->\n"
                    "F1 0.196 against 0.194; F1 of 0.38, F1\n**0.550**; F1 +0.035 [0.000, +0.091]; "
                    "EM/F1 0.2; F1 0.1234\n", encoding="utf-8")
    quotes = numbers.f1_quotes_in(page)
    assert [(q.line, q.text) for q in quotes] == [(4, "0.196"), (4, "0.38"), (4, "0.550")]
    assert quotes[1].matches(0.3849) and not quotes[1].matches(0.386)
    assert quotes[0].matches(0.1964) and not quotes[0].matches(0.1966)


def test_an_f1_typed_wrong_is_found(tmp_path):
    known = numbers.derivable_f1()
    right = next(v for v in known if 0.1 < v < 0.9)
    # a figure at least 0.001 away from every F1 the results give
    wrong = next(x / 1000 for x in range(100, 900) if all(abs(x / 1000 - v) > 0.001 for v in known))
    page = tmp_path / "page.md"
    page.write_text(f"F1 {right:.3f} on 30 questions.\n\nAnd F1 {wrong:.3f}, typed wrong.\n", encoding="utf-8")
    assert [(q.line, q.text) for q in numbers.unexplained_f1([page])] == [(3, f"{wrong:.3f}")]


def test_every_transcribed_f1_is_quoted_says_what_and_why_and_is_not_in_the_results():
    quoted = {q.text for page in numbers.doc_pages() for q in numbers.f1_quotes_in(page)}
    for entry in numbers.transcribed_f1():
        assert entry["quote"] in quoted, f"listed but no longer quoted: F1 {entry['quote']}"
        assert entry["what"] and entry["date"] and entry["why"]
        quote = numbers.F1Quote(Path("listed.md"), 1, entry["quote"])
        # an unrelated run's F1 that rounds the same is named (``coincides_with``), and must still do so
        assert any(quote.matches(v) for v in numbers.derivable_f1()) == bool(entry.get("coincides_with")), (
            f"F1 {entry['quote']} is recomputed from the results: drop it from {numbers.TRANSCRIBED.name}, or "
            "name the unrelated figure it coincides with" if not entry.get("coincides_with") else
            f"F1 {entry['quote']} no longer coincides with {entry['coincides_with']}: drop coincides_with")
