"""The paired differences the docs' prose quotes, checked against the results they come from.

    .venv/bin/python benchmarks/doc_numbers.py

The docs' tables are rendered from results (``benchmarks/doc_tables.py``); their prose quotes
differences too — "+0.087 [+0.003, +0.189]", a paired difference and its bootstrap 95 % interval
— typed while writing. Each such quote (a signed difference followed by its interval, outside
the rendered tables, with the p-value and the wins / ties / losses that follow it where the docs
give them: ``+0.087 [+0.003, +0.189], p = 0.094, 6 / 22 / 2``) must be one of:

- **a stored comparison**: any object with ``diff``, ``low`` and ``high`` in a results file under
  ``docs/results/`` (the presets benchmark's comparisons, the eval-methods figures, ...);
- **a pairing of stored runs**: ``compare_by_id`` (as ``hopqa report`` pairs runs) of two runs'
  per-question F1 stored in the same table of a results file (``f1_by_id``) — on all the
  questions both answered, on the first 10 or 20 of them (the docs' "on the first 10", in the
  order the figures hold them, the dataset's), or pooled over the tables that hold a run of the
  same label, per setting and over all of them (the docs' "over the 90 questions") — or of
  two runs of the 30-question MuSiQue fixture the intervals page reports (F1, EM,
  supporting recall);
- **transcribed**: listed in ``docs/results/transcribed-comparisons.json`` with what it compares,
  its date and why it cannot be recomputed (the runs were not kept, or it is over a subset of
  a run's questions the figures do not name). An entry may give its wins / ties / losses
  (``counts``): the test that no transcribed comparison can be recomputed then matches them too,
  so a pairing of other runs that rounds to the same interval is not taken for it.

Each is matched at the precision it is quoted with, its p-value and counts too (a transcribed
one by its interval alone).

An F1 the prose quotes on its own (``F1 0.196``, ``F1 of 0.38``, outside the rendered tables)
must likewise be one of: the F1 of a run stored in ``docs/results/`` (any ``f1`` there, or the
mean of a run's ``f1_by_id`` on all its questions or on its first 10 or 20), the mean F1 of a
run of the 30-question MuSiQue fixture (on all, or its first 10 or 20), or listed under ``f1``
in ``docs/results/transcribed-comparisons.json`` with what it is, its date and why it cannot be
recomputed. Only the F1 that follows the word is checked: in "F1 0.092 against 0.057" the
second figure is not.

A quote that is none of these is printed with its page and line, and the script exits 1;
``tests/test_doc_numbers.py`` runs the check in the test suite, so a number typed wrong, or left
behind when its run was re-run, fails a test.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# benchmarks/doc_tables.py (the script's folder is on sys.path): the docs' root, the 30-question
# MuSiQue runs of the intervals page, and the markers of a rendered table (its check's)
from doc_tables import DOCS, MARKED, MUSIQUE30, ROOT

RESULTS = DOCS / "results"
TRANSCRIBED = RESULTS / "transcribed-comparisons.json"
#: The per-question metrics of ``MUSIQUE30`` the intervals page compares.
MUSIQUE30_METRICS = ("f1", "em", "support_recall")
#: A signed difference and its interval: ``+0.087 [+0.003, +0.189]``, ``−0.050 [−0.133, 0.000]``;
#: then, when the docs give them, its p-value and its wins / ties / losses:
#: ``+0.087 [+0.003, +0.189], p = 0.094, 6 / 22 / 2``.
QUOTE = re.compile(r"(?<![\w.])(?P<diff>[+−-]\d+\.\d+)\s+\[(?P<low>[+−-]?\d+\.\d+),\s+(?P<high>[+−-]?\d+\.\d+)\]"
                   r"(?:(?:\*\*)?,\s+p\s+=\s+(?P<p>\d\.\d+))?"
                   r"(?:(?:\*\*)?,\s+(?P<wins>\d+)\s+/\s+(?P<ties>\d+)\s+/\s+(?P<losses>\d+)\b)?")
#: An F1 quoted on its own: ``F1 0.196``, ``F1 of 0.38``, ``F1 **0.550**``.
F1_QUOTE = re.compile(r"(?<![\w.])F1\s+(?:of\s+)?(?:\*\*)?(?P<value>[01]\.\d{2,3})(?!\d)")

Triple = tuple[float, float, float]


def _shown(page: Path) -> Path:
    """``page`` as a message names it: relative to the repository where it is in it."""
    return page.relative_to(ROOT) if page.is_relative_to(ROOT) else page


def _rounds_to(written: str, value: float) -> bool:
    """Whether ``value`` rounds to the figure ``written`` ("0.094") at its precision."""
    places = len(written.split(".")[1])
    return abs(float(written) - value) <= 0.5 * 10 ** -places + 1e-9


def _prose(page: Path, text: str | None) -> str:
    """``page``'s text (or ``text`` as that page) with its rendered tables blanked, line count kept
    (the tables are doc_tables' check)."""
    text = page.read_text(encoding="utf-8") if text is None else text
    return MARKED.sub(lambda m: "\n" * m.group(0).count("\n"), text)


@dataclass(frozen=True)
class Figures:
    """A paired difference as the results give it: its interval, and its p-value and wins / ties
    / losses where they hold them."""

    values: Triple
    p_value: float | None = None
    counts: tuple[int, int, int] | None = None

    def mirrored(self) -> Figures:
        """The same comparison the other way round (``b − a`` for ``a − b``)."""
        diff, low, high = self.values
        counts = None if self.counts is None else (self.counts[2], self.counts[1], self.counts[0])
        return Figures((-diff, -high, -low), self.p_value, counts)


@dataclass(frozen=True)
class Quote:
    """A difference and its interval as a page quotes it."""

    page: Path
    line: int
    text: str
    values: Triple
    decimals: int
    p_value: str | None = None  # as written: "0.094"
    counts: tuple[int, int, int] | None = None

    @property
    def interval(self) -> str:
        """The difference and its interval alone: ``+0.087 [+0.003, +0.189]``."""
        return self.text[:self.text.index("]") + 1]

    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}: {self.text}"

    def matches(self, figures: Figures) -> bool:
        """Whether ``figures`` round to this quote at the precision it is written with: the
        interval, and the p-value and the counts where the quote gives them (figures without
        them do not match such a quote)."""
        half = 0.5 * 10 ** -self.decimals + 1e-9
        if not all(abs(q - v) <= half for q, v in zip(self.values, figures.values)):
            return False
        if self.p_value is not None:
            if figures.p_value is None:
                return False
            if not _rounds_to(self.p_value, figures.p_value):
                return False
        return self.counts is None or self.counts == figures.counts


def _float(text: str) -> float:
    return float(text.replace("−", "-"))


def quotes_in(page: Path, text: str | None = None) -> list[Quote]:
    """The quoted differences of ``page`` (or of ``text`` as that page), outside its rendered tables."""
    text = _prose(page, text)
    found = []
    for m in QUOTE.finditer(text):  # a quote may wrap: its line is the one it starts on
        interval = (m["diff"], m["low"], m["high"])
        counts = (int(m["wins"]), int(m["ties"]), int(m["losses"])) if m["wins"] else None
        found.append(Quote(page, text.count("\n", 0, m.start()) + 1, " ".join(m.group(0).split()),
                           tuple(_float(g) for g in interval), min(len(g.split(".")[1]) for g in interval),
                           m["p"], counts))
    return found


@dataclass(frozen=True)
class F1Quote:
    """An F1 as a page quotes it on its own (``F1 0.196``)."""

    page: Path
    line: int
    text: str  # as written: "0.196"

    @property
    def value(self) -> float:
        return float(self.text)

    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}: F1 {self.text}"

    def matches(self, value: float) -> bool:
        """Whether ``value`` rounds to this quote at the precision it is written with."""
        return _rounds_to(self.text, value)


def f1_quotes_in(page: Path, text: str | None = None) -> list[F1Quote]:
    """The F1 figures ``page`` (or ``text`` as that page) quotes on their own, outside its rendered tables."""
    text = _prose(page, text)
    return [F1Quote(page, text.count("\n", 0, m.start()) + 1, m["value"]) for m in F1_QUOTE.finditer(text)]


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


def _stored(data: Any) -> Iterator[Figures]:
    """Every ``{"diff", "low", "high"}`` anywhere in ``data`` (with its ``p_value``, ``wins``,
    ``ties`` and ``losses`` where it has them)."""
    if isinstance(data, dict):
        if all(isinstance(data.get(k), (int, float)) for k in ("diff", "low", "high")):
            counts = tuple(data[k] for k in ("wins", "ties", "losses"))
            yield Figures((float(data["diff"]), float(data["low"]), float(data["high"])),
                          data.get("p_value"), counts if all(isinstance(c, int) for c in counts) else None)
        for value in data.values():
            yield from _stored(value)
    elif isinstance(data, list):
        for value in data:
            yield from _stored(value)


def _per_question(data: Any) -> Iterator[dict[str, float]]:
    """Every run's ``f1_by_id`` anywhere in ``data``."""
    if isinstance(data, dict):
        if isinstance(data.get("f1_by_id"), dict):
            yield data["f1_by_id"]
        for value in data.values():
            yield from _per_question(value)
    elif isinstance(data, list):
        for value in data:
            yield from _per_question(value)


#: The first questions of a run the docs also compare on ("on the first 10").
PREFIXES = (10, 20)


def _pairings(runs: Iterable[dict[str, float]], prefixes: Iterable[int] = ()) -> Iterator[Figures]:
    """``compare_by_id`` of every two runs, both ways (the interval of ``b − a`` is that of
    ``a − b`` mirrored), on the questions both answered and on the first of them (``prefixes``)."""
    from hopqa.evaluation.report import compare_by_id

    for a, b in itertools.combinations(list(runs), 2):
        subsets = [a] + [dict(itertools.islice(a.items(), n)) for n in prefixes if n < len(a)]
        for mine in subsets:
            c = compare_by_id(mine, b)
            if c.n:
                figures = Figures((c.diff, c.low, c.high), c.p_value, (c.wins, c.ties, c.losses))
                yield figures
                yield figures.mirrored()


def _pooled(tables: list[dict[str, Any]]) -> list[list[dict[str, float]]]:
    """Each run label's per-question F1 pooled over the tables that have it (ids prefixed with
    the dataset and setting), per setting and over every table, for the labels in more than one."""
    groups: dict[str, dict[str, dict[str, float]]] = {}
    for table in tables:
        setting = str(table.get("setting", ""))
        for run in table.get("runs", []):
            if isinstance(run.get("f1_by_id"), dict) and "label" in run:
                for group in (setting, "*"):
                    values = groups.setdefault(group, {}).setdefault(run["label"], {})
                    values.update({f"{table.get('dataset')}/{setting}/{q}": v for q, v in run["f1_by_id"].items()})
    return [[values for values in runs.values()
             if len({key.rsplit("/", 1)[0] for key in values}) > 1] for runs in groups.values()]


@functools.cache
def derivable() -> list[Figures]:
    """Every difference the results can give: stored comparisons, and the pairings of the runs
    stored with their per-question F1 in one table of a results file or in ``MUSIQUE30``."""
    found: list[Figures] = []
    for path in sorted(RESULTS.glob("*.json")):
        if path == TRANSCRIBED:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        found += _stored(data)
        tables = data.get("tables") if isinstance(data, dict) else None
        for group in tables if isinstance(tables, list) else [data]:
            found += _pairings(_per_question(group), PREFIXES)
        for runs in _pooled(tables) if isinstance(tables, list) else []:
            found += _pairings(runs)
    runs = json.loads(gzip.decompress(MUSIQUE30.read_bytes()))["runs"].values()
    for metric in MUSIQUE30_METRICS:
        found += _pairings({r["id"]: r["metrics"][metric] for r in run["records"]
                            if metric in (r.get("metrics") or {})} for run in runs)
    return found


def transcribed(path: Path = TRANSCRIBED) -> list[dict[str, Any]]:
    """The listed comparisons whose runs are gone (``quote``, ``what``, ``date``, ``why``)."""
    return json.loads(path.read_text(encoding="utf-8"))["comparisons"]


def transcribed_f1(path: Path = TRANSCRIBED) -> list[dict[str, Any]]:
    """The listed F1 figures whose runs are gone (``quote``: "0.181", ``what``, ``date``, ``why``)."""
    return json.loads(path.read_text(encoding="utf-8")).get("f1", [])


def _means(values: list[float]) -> Iterator[float]:
    """The mean of ``values`` and of their first 10 and 20 (``PREFIXES``)."""
    for n in [len(values)] + [n for n in PREFIXES if n < len(values)]:
        if n:
            yield sum(values[:n]) / n


def _f1_values(data: Any) -> Iterator[float]:
    """Every ``f1`` number anywhere in ``data``."""
    if isinstance(data, dict):
        if isinstance(data.get("f1"), (int, float)) and not isinstance(data.get("f1"), bool):
            yield float(data["f1"])
        for value in data.values():
            yield from _f1_values(value)
    elif isinstance(data, list):
        for value in data:
            yield from _f1_values(value)


@functools.cache
def derivable_f1() -> list[float]:
    """Every F1 the results can give (see the module's docstring)."""
    found: list[float] = []
    for path in sorted(RESULTS.glob("*.json")):
        if path == TRANSCRIBED:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        found += _f1_values(data)
        found += [m for by_id in _per_question(data) for m in _means([float(v) for v in by_id.values()])]
    for run in json.loads(gzip.decompress(MUSIQUE30.read_bytes()))["runs"].values():
        found += _means([float((r.get("metrics") or {}).get("f1", 0.0)) for r in run["records"]])
    return sorted(set(found))


def unexplained_f1(pages: Iterable[Path] | None = None) -> list[F1Quote]:
    """The F1 figures of ``pages`` (every docs page and the README) quoted on their own that are
    neither derivable from the results nor transcribed."""
    listed = {entry["quote"] for entry in transcribed_f1()}
    return [quote for page in (doc_pages() if pages is None else pages) for quote in f1_quotes_in(page)
            if quote.text not in listed and not any(quote.matches(v) for v in derivable_f1())]


def unexplained(pages: Iterable[Path] | None = None) -> list[Quote]:
    """The quotes of ``pages`` (every docs page and the README) that are neither derivable from
    the results nor transcribed."""
    listed = {entry["quote"] for entry in transcribed()}
    out = []
    for page in doc_pages() if pages is None else pages:
        for quote in quotes_in(page):
            if quote.interval in listed or any(quote.matches(t) for t in derivable()):
                continue
            out.append(quote)
    return out


def main() -> int:
    missing = [quote.where() for quote in unexplained()] + [quote.where() for quote in unexplained_f1()]
    for where in missing:
        print(f"not in the results: {where}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
