"""Comparison reports: methods x metrics with cost and their intervals, paired comparisons
against a baseline, breakdowns; as Markdown, HTML with plots, and JSON.

``build_report(run_dirs, out_dir)`` finds every ``results.jsonl`` under the given directories,
recomputes each run's summary from its lines (so a half-finished run reports what it has),
and writes ``report.md``, ``report.html`` (with matplotlib PNGs embedded: score vs cost per
method, per-dataset bars with their intervals, and the differences to the baseline) and
``report.json`` into ``out_dir``.

- **Intervals.** Every figure of the table carries its 95 % bootstrap interval over the run's
  questions (``hopqa.evaluation.stats.interval``): ``0.380 ±0.120`` in Markdown (half the
  interval's width), both ends in HTML and JSON. ``#Doc/#API`` (a ratio of two means) has none.
- **Partial runs.** A run that recorded fewer questions than it was asked (``questions.json``,
  written by ``evaluate``: stopped early, still running) shows ``partial (n of N)`` in its
  ``n`` cell and its plot labels.
- **Paired comparisons** (``baseline=METHOD``): every other method of the same dataset,
  split, setting and stratum against the baseline, on the question ids both recorded
  (``stats.compare``: the mean difference, its paired bootstrap interval, the permutation
  p-value, wins / ties / losses, the questions an interval of ±0.05 would need); ids recorded
  by only one of the two are counted and named, never mixed in. A failed question scores 0 on
  answer metrics, as in the table; a metric a question lacks (supporting-paragraph recall
  without gold paragraphs) leaves it out of that metric's comparison.
- **Breakdowns.** ``stratify=True`` splits each run by question length as in HGOT (Fang et al.
  2024, Table 1): Long above the ``long_pct`` percentile of the run's question lengths in
  words, Short below ``short_pct``, Medium between (defaults 98.5 and 1.5; HGOT used 98 and 2
  for HotpotQA). ``by=FIELD`` splits by a field of the examples (``field_value``): MuSiQue's
  ``hops`` (2 / 3 / 4, from the id), any field recorded in a record's ``fields`` (HotpotQA's
  ``type`` and ``level``, 2WikiMultihopQA's ``type``, a question file's extras) or of the
  record itself (``status``).

Every resampling uses one fixed seed (``stats.SEED``, or ``seed=``) and draws questions in the
order of their ids: a report made twice is the same, and so is a report of the same results
recorded in another order (a resumed run, a run with several workers).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hopqa.config import write_atomic
from hopqa.console import one_line
from hopqa.evaluation import stats
from hopqa.evaluation.runner import (
    ANSWER_METRICS,
    PER_QUESTION_USAGE,
    read_asked,
    read_results,
    record_parse_counts,
    summarize,
)
from hopqa.trace import PARSE_DIRECT, PARSE_FALLBACK
from hopqa.types import Usage

#: Columns of the table: (key, header, where: "metrics" or "cost", format).
COLUMNS = [
    ("em", "EM", "metrics", "{:.3f}"),
    ("f1", "F1", "metrics", "{:.3f}"),
    ("precision", "Prec", "metrics", "{:.3f}"),
    ("recall", "Rec", "metrics", "{:.3f}"),
    ("rouge_l", "ROUGE-L", "metrics", "{:.3f}"),
    ("bertscore", "BERTScore", "metrics", "{:.3f}"),
    ("acc", "Acc (judge)", "metrics", "{:.3f}"),
    ("label_acc", "Label acc", "metrics", "{:.3f}"),
    ("support_recall", "Sup. recall", "metrics", "{:.3f}"),
    ("support_precision", "Sup. prec", "metrics", "{:.3f}"),
    ("support_f1", "Sup. F1", "metrics", "{:.3f}"),
    ("k_precision", "K-prec", "metrics", "{:.3f}"),
    ("docs_reviewed", "#Doc", "metrics", "{:.1f}"),
    ("docs_per_call", "#Doc/#API", "metrics", "{:.1%}"),
    ("evidence", "#Evidence", "metrics", "{:.1f}"),
    ("parse_rate", "parsed", "metrics", "{:.1%}"),
    ("parse_fallback_rate", "parse fallback", "metrics", "{:.1%}"),
    ("llm_calls_per_q", "LLM calls/q", "cost", "{:.1f}"),
    ("prompt_tokens_per_q", "prompt tok/q", "cost", "{:.0f}"),
    ("prompt_tokens_evaluated_per_q", "evaluated tok/q", "cost", "{:.0f}"),
    ("completion_tokens_per_q", "compl. tok/q", "cost", "{:.0f}"),
    ("retrieval_calls_per_q", "retrievals/q", "cost", "{:.1f}"),
    ("seconds_per_q", "s/q", "cost", "{:.1f}"),
    ("cache_hit_rate", "cache hits", "cost", "{:.0%}"),
]


#: Said under a table without BERTScore (LeapQuery's metric needs a model; none is the default).
BERTSCORE_NOTE = ("BERTScore: not computed. `hopqa eval --bertscore MODEL` adds it (`minilm`: the shipped "
                  "all-MiniLM-L6-v2, not comparable to the papers' roberta-large, which is not available offline).")


#: Metrics compared against a baseline by default (those the runs have).
COMPARED = ("em", "f1", "acc", "label_acc")
#: Half-width of the interval ``n for ±0.05`` is computed for.
TARGET_HALF_WIDTH = 0.05
#: Ids named when they are in only one of two compared runs (then a count).
NAMED_IDS = 5
#: What a question lacking a ``--by`` field is filed under.
NOT_RECORDED = "(not recorded)"


@dataclass(eq=False)
class Row:
    """One run (or one stratum of it) in the table. ``intervals`` holds the ends of each
    figure's 95 % interval; ``run_n`` and ``asked`` the run's records and the questions it was
    asked (``None``: not known); ``records`` the stratum's records by id (not reported)."""

    dataset: str
    split: str
    setting: str
    method: str
    stratum: str
    n: int
    failed: int
    metrics: dict[str, float]
    cost: dict[str, float]
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    run_n: int | None = None
    asked: int | None = None
    run: str = ""
    records: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    label: str = ""  # the method, with its run directory's distinguishing part when two runs share it

    @property
    def name(self) -> str:
        return self.label or self.method

    @property
    def partial(self) -> bool:
        return self.asked is not None and (self.run_n if self.run_n is not None else self.n) < self.asked

    @property
    def partial_label(self) -> str:
        """``partial (n of N)``, or nothing for a complete run."""
        return f"partial ({self.run_n if self.run_n is not None else self.n} of {self.asked})" if self.partial else ""

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "split": self.split, "setting": self.setting, "method": self.method,
                "stratum": self.stratum, "n": self.n, "failed": self.failed, "metrics": self.metrics,
                "cost": self.cost, "intervals": {k: [_json_number(lo), _json_number(hi)]
                                                 for k, (lo, hi) in self.intervals.items()},
                "run_n": self.run_n, "asked": self.asked, "partial": self.partial, "run": self.run,
                "label": self.name}


@dataclass(eq=False)
class PairedRow:
    """A method against the baseline on the ids both recorded, for one metric and stratum."""

    dataset: str
    split: str
    setting: str
    stratum: str
    metric: str
    method: str
    baseline: str
    result: stats.Comparison
    only_method: list[str]
    only_baseline: list[str]
    partial: list[str]  # the partial labels of either run ("hgot partial (12 of 30)")

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {"dataset": self.dataset, "split": self.split, "setting": self.setting, "stratum": self.stratum,
                "metric": self.metric, "method": self.method, "baseline": self.baseline, "n": r.n,
                "diff": _json_number(r.diff), "low": _json_number(r.low), "high": _json_number(r.high),
                "p_value": _json_number(r.p_value), "wins": r.wins, "ties": r.ties, "losses": r.losses,
                "excludes_zero": r.excludes_zero, "significant": r.significant,
                f"n_for_pm{TARGET_HALF_WIDTH}": r.needed,
                "only_in_method": self.only_method, "only_in_baseline": self.only_baseline,
                "partial": self.partial}


def _json_number(x: float) -> float | None:
    """``nan`` as ``null``: JSON has no NaN."""
    return None if x is None or math.isnan(x) else x


def find_runs(paths: list[str | Path]) -> list[Path]:
    """Directories holding a results.jsonl under the given paths (each path itself included)."""
    runs: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no run directory at {p}")
        found = [p] if (p / "results.jsonl").is_file() else sorted(f.parent for f in p.rglob("results.jsonl"))
        runs += [r for r in found if r not in runs]
    return runs


def _strata(records: list[dict[str, Any]], long_pct: float, short_pct: float) -> dict[str, list[dict[str, Any]]]:
    import numpy as np

    lengths = np.array([r.get("question_words") or len(str(r.get("question", "")).split()) for r in records])
    if not len(lengths):
        return {}
    hi, lo = np.percentile(lengths, long_pct), np.percentile(lengths, short_pct)
    out: dict[str, list[dict[str, Any]]] = {"long": [], "medium": [], "short": []}
    for r, n in zip(records, lengths):
        out["long" if n > hi else "short" if n < lo else "medium"].append(r)
    return out


_HOPS = re.compile(r"^(\d+)hop")


def field_value(record: dict[str, Any], name: str) -> str:
    """The value of field ``name`` of a recorded question, as text: ``hops`` of a MuSiQue id
    (``2hop__…`` → ``2``), else the record's ``fields`` (the example's extras), else the record's
    own field; ``NOT_RECORDED`` when it has none."""
    if name == "hops":
        found = _HOPS.match(str(record.get("id", "")))
        if found:
            return found.group(1)
    fields = record.get("fields")
    value = fields.get(name) if isinstance(fields, dict) else None
    if value is None and name not in ("fields", "metrics", "usage", "trace", "passages"):
        value = record.get(name)
    if value is None or isinstance(value, (dict, list)):
        return NOT_RECORDED
    return one_line(value)[:80]


def _groups(records: list[dict[str, Any]], name: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(f"{name}={field_value(r, name)}", []).append(r)
    return dict(sorted(out.items(), key=lambda kv: _natural(kv[0])))


def _natural(text: str) -> list[Any]:
    """Sort key that orders ``hops=10`` after ``hops=9``."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def collect_rows(run_dirs: list[Path], stratify: bool = False, long_pct: float = 98.5,
                 short_pct: float = 1.5, by: Iterable[str] = (), seed: int = stats.SEED) -> list[Row]:
    """One row per run (stratum ``all``) and per stratum of it (``stratify``: by question
    length; ``by``: by each field), each with its intervals."""
    rows: list[Row] = []
    for d in run_dirs:
        by_id = read_results(d / "results.jsonl")
        records = [by_id[qid] for qid in sorted(by_id, key=str)]  # id order: the resamples' positions
        if not records:
            continue
        first = records[0]
        asked = read_asked(d)
        groups: dict[str, list[dict[str, Any]]] = {"all": records}
        if stratify:
            groups.update(_strata(records, long_pct, short_pct))
        for name in by:
            groups.update(_groups(records, name))
        for stratum, recs in groups.items():
            if not recs:
                continue
            s = summarize(recs, d)
            row = Row(first.get("dataset", ""), first.get("split", ""), _setting(first.get("setting", ""), d),
                      first.get("method", d.name), stratum, s.n, s.failed, s.metrics, s.cost,
                      run_n=len(records), asked=asked, run=str(d), records={str(r.get("id")): r for r in recs})
            row.intervals = _intervals(recs, row, seed)
            rows.append(row)
    _label_runs(rows)
    return rows


def _label_runs(rows: list[Row]) -> None:
    """Name the runs of one method that share a dataset, split and setting by the first part
    of their directories' paths that differs (``leapquery (hybrid-run)``)."""
    clashes: dict[tuple[str, str, str, str], list[Row]] = {}
    for r in rows:
        clashes.setdefault((r.dataset, r.split, r.setting, r.method), []).append(r)
    for group in clashes.values():
        runs = list(dict.fromkeys(r.run for r in group))
        if len(runs) < 2:
            continue
        parts = [Path(run).parts for run in runs]
        common = 0
        while all(len(p) > common and p[common] == parts[0][common] for p in parts):
            common += 1
        names = {run: (p[common] if len(p) > common else run) for run, p in zip(runs, parts)}
        for r in group:
            r.label = f"{r.method} ({names[r.run]})"


def _per_question(records: list[dict[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    """Each figure of the table as per-question ``(numerator, denominator)`` lists whose sums'
    ratio is the figure ``summarize`` computes (a mean: denominators 1)."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    keys = sorted({k for r in records for k in (r.get("metrics") or {})})
    for key in keys:
        num, den = [], []
        for r in records:
            value = (r.get("metrics") or {}).get(key)
            num.append(float(value) if value is not None else 0.0)
            den.append(1.0 if value is not None or key in ANSWER_METRICS else 0.0)
        out[key] = (num, den)
    parses = [record_parse_counts(r) for r in records]
    totals = [float(sum(c.values())) for c in parses]
    out["parse_rate"] = ([float(c[PARSE_DIRECT]) for c in parses], totals)
    out["parse_fallback_rate"] = ([float(c[PARSE_FALLBACK]) for c in parses], totals)
    usages = [Usage.from_dict(r.get("usage") or {}) for r in records]
    ones = [1.0] * len(records)
    for key, attr in PER_QUESTION_USAGE:
        out[key] = ([float(getattr(u, attr)) for u in usages], ones)
    out["cache_hit_rate"] = ([float(u.cache_hits) for u in usages], [float(u.llm_calls) for u in usages])
    return out


def _intervals(records: list[dict[str, Any]], row: Row, seed: int) -> dict[str, tuple[float, float]]:
    shown = set(row.metrics) | set(row.cost)
    figures = {key: pair for key, pair in _per_question(records).items() if key in shown}
    return {key: (found.low, found.high) for key, found in stats.intervals(figures, seed=seed).items()}


def _values(row: Row, metric: str) -> dict[str, float]:
    """Per-question values of ``metric`` by id: a failed question scores 0 on an answer metric,
    a question without another metric is left out."""
    out = {}
    for qid, r in row.records.items():
        value = (r.get("metrics") or {}).get(metric)
        if value is not None:
            out[qid] = float(value)
        elif metric in ANSWER_METRICS:
            out[qid] = 0.0
    return out


def compare_by_id(mine: Mapping[str, float], theirs: Mapping[str, float], seed: int = stats.SEED) -> stats.Comparison:
    """``stats.compare`` of two methods' values by question id, on the ids both hold, in id
    order (whichever order either run recorded them in); the sample size it reports is for
    ``TARGET_HALF_WIDTH``."""
    shared = sorted((q for q in mine if q in theirs), key=str)
    return stats.compare([mine[q] for q in shared], [theirs[q] for q in shared], seed=seed,
                         half_width=TARGET_HALF_WIDTH)


def compare_rows(rows: list[Row], baseline: str, metrics: Iterable[str] = COMPARED,
                 seed: int = stats.SEED) -> list[PairedRow]:
    """Every row against the row of method ``baseline`` with the same dataset, split, setting
    and stratum, for each of ``metrics`` both have; ``ValueError`` if no row is ``baseline``."""
    bases = [r for r in rows if r.label == baseline] or [r for r in rows if r.method == baseline]
    if not bases:
        methods = ", ".join(sorted({r.name for r in rows})) or "none"
        raise ValueError(f"no run of the baseline method {baseline!r} (the runs hold: {methods})")
    out = []
    for base in bases:
        peers = [r for r in rows if r.run != base.run and all(r is not b for b in bases) and
                 (r.dataset, r.split, r.setting, r.stratum) == (base.dataset, base.split, base.setting, base.stratum)]
        for other in peers:
            for metric in metrics:
                if metric not in other.metrics or metric not in base.metrics:
                    continue
                result = compare_by_id(_values(other, metric), _values(base, metric), seed=seed)
                partial = [f"{r.name} {r.partial_label}" for r in (other, base) if r.partial]
                out.append(PairedRow(base.dataset, base.split, base.setting, base.stratum, metric, other.name,
                                     base.name, result, sorted(set(other.records) - set(base.records)),
                                     sorted(set(base.records) - set(other.records)), partial))
    return out


def _setting(setting: str, run_dir: Path) -> str:
    """The run's setting, with the search it chose when that was not the default BM25
    (``config.json``'s ``search``): ``open (hybrid, rerank bi-encoder)``."""
    try:
        search = json.loads((run_dir / "config.json").read_text(encoding="utf-8")).get("search") or {}
    except (OSError, ValueError, AttributeError):
        return setting
    if not isinstance(search, dict):
        return setting
    parts = [str(search.get("retriever") or "bm25")]
    if search.get("rerank"):
        parts.append(f"rerank {search['rerank']}")
    return f"{setting} ({', '.join(parts)})" if search else setting


def _present(rows: list[Row]) -> list[tuple[str, str, str, str]]:
    return [c for c in COLUMNS if any(c[0] in (r.metrics if c[2] == "metrics" else r.cost) for r in rows)]


def _ends(row: Row, key: str) -> tuple[float, float] | None:
    found = row.intervals.get(key)
    if found is None or any(math.isnan(x) for x in found):
        return None
    return found


def _cell(row: Row, col: tuple[str, str, str, str], style: str = "md") -> str:
    """A figure with its interval: ``0.380 ±0.120`` (``md``: half the interval's width) or
    ``0.380 [0.260, 0.500]`` (``html``); the figure alone where it has no interval."""
    src = row.metrics if col[2] == "metrics" else row.cost
    if col[0] not in src:
        return "–"
    text = col[3].format(src[col[0]])
    ends = _ends(row, col[0])
    if ends is None:
        return text
    if style == "html":
        return f"{text} [{col[3].format(ends[0])}, {col[3].format(ends[1])}]"
    return f"{text} ±{col[3].format((ends[1] - ends[0]) / 2)}"


def _n_cell(row: Row) -> str:
    if not row.partial:
        return str(row.n)
    return row.partial_label if row.n == row.run_n else f"{row.n}, {row.partial_label}"


def _md(text: Any) -> str:
    """A Markdown table cell: one line, no terminal control characters, ``|`` escaped (the
    names come from results files, which anyone may have written)."""
    return one_line(text).replace("|", "\\|")


def _head(cols: list[tuple[str, str, str, str]]) -> list[str]:
    return ["dataset", "setting", "method", "stratum", "n", "failed"] + [c[1] for c in cols]


def markdown_table(rows: list[Row]) -> str:
    """The rows as a Markdown table (printed by ``hopqa eval`` and ``hopqa report``): each
    figure ``value ±half-width`` of its 95 % bootstrap interval over the questions."""
    cols = _present(rows)
    head = _head(cols)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [_md(f"{r.dataset}/{r.split}"), _md(r.setting), _md(r.name), _md(r.stratum), _n_cell(r),
                 str(r.failed)]
        lines.append("| " + " | ".join(cells + [_cell(r, c) for c in cols]) + " |")
    if any(r.intervals for r in rows):
        lines += ["", ("± half the width of the 95 % bootstrap interval over the questions (docs/evaluation.md: Reading the "
                       "intervals).")]
    if any("rouge_l" in r.metrics for r in rows) and not any("bertscore" in r.metrics for r in rows):
        lines += ["", BERTSCORE_NOTE]
    return "\n".join(lines)


def _signed(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:+.3f}"


def _p(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.4f}" if x < 0.001 else f"{x:.3f}"


def _verdict(r: stats.Comparison, bold: bool = False) -> str:
    """Whether the interval excludes 0: ``yes`` (bold in Markdown) when the permutation test
    agrees, ``yes, but p ≥ 0.05`` when it does not (too few questions differ), else ``no``."""
    if r.significant:
        return "**yes**" if bold else "yes"
    return "yes, but p ≥ 0.05" if r.excludes_zero else "no"


def comparison_table(pairs: list[PairedRow]) -> str:
    """The paired comparisons as Markdown, with the notes on ids in only one run and partial runs."""
    if not pairs:
        return "No method to compare with the baseline (no other run of the same dataset, split and setting)."
    head = ["dataset", "setting", "stratum", "metric", "method", "vs", "n", "difference [95 % CI]", "excludes 0",
            "p", "win / tie / loss", f"n for ±{TARGET_HALF_WIDTH}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes: list[str] = []
    for p in pairs:
        r = p.result
        cells = [_md(f"{p.dataset}/{p.split}"), _md(p.setting), _md(p.stratum), p.metric, _md(p.method),
                 _md(p.baseline), str(r.n), f"{_signed(r.diff)} [{_signed(r.low)}, {_signed(r.high)}]",
                 _verdict(r, bold=True), _p(r.p_value), f"{r.wins} / {r.ties} / {r.losses}",
                 "–" if r.needed is None else str(r.needed)]
        lines.append("| " + " | ".join(cells) + " |")
        note = _pair_note(p)
        if note and note not in notes:
            notes.append(note)
    lines += ["", ("difference: method minus baseline on the questions both recorded; the interval is the paired "
                   "bootstrap's, p the paired permutation test's (two-sided); excludes 0: **yes** when the interval "
                   "excludes 0 and p < 0.05, \"yes, but p ≥ 0.05\" when only the interval does (too few questions "
                   "differ for the bootstrap's interval to be trusted); n for "
                   f"±{TARGET_HALF_WIDTH}: the questions an interval that narrow would need at the observed spread.")]
    if notes:
        lines += [""] + [f"- {_md(n)}" for n in notes]
    return "\n".join(lines)


def _pair_note(p: PairedRow) -> str:
    parts = []
    for name, ids in ((p.method, p.only_method), (p.baseline, p.only_baseline)):
        if ids:
            shown = ", ".join(ids[:NAMED_IDS]) + (f", … ({len(ids) - NAMED_IDS} more)" if len(ids) > NAMED_IDS else "")
            parts.append(f"{len(ids)} ids only in {name} ({shown})")
    parts += p.partial
    if not parts:
        return ""
    return (f"{p.method} vs {p.baseline} ({p.dataset}/{p.split}, {p.setting}, {p.stratum}): " + "; ".join(parts)
            + f" — compared on the {p.result.n} ids both recorded")


def _save(fig: Any, path: Path) -> Path:
    """Write a matplotlib figure as PNG atomically (a reader never sees half an image) and close it."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, buffer.getvalue())
    return path


def _label(r: Row) -> str:
    return r.name + (f" {r.partial_label}" if r.partial else "")


def _errors(rows: list[Row], key: str) -> list[list[float]]:
    """matplotlib's ``yerr`` of each row's figure from its interval (0 where it has none)."""
    low, high = [], []
    for r in rows:
        ends, value = _ends(r, key), r.metrics.get(key, 0.0)
        low.append(max(0.0, value - ends[0]) if ends else 0.0)
        high.append(max(0.0, ends[1] - value) if ends else 0.0)
    return [low, high]


def _plots(rows: list[Row], pairs: list[PairedRow], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = [r for r in rows if r.stratum == "all"]
    if not main:
        return []
    paths = []
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in main:
        tokens = r.cost.get("prompt_tokens_per_q", 0) + r.cost.get("completion_tokens_per_q", 0)
        err = _errors([r], "f1")
        ax.errorbar([tokens], [r.metrics.get("f1", 0.0)], yerr=err, fmt="o", capsize=3)
        ax.annotate(f"{_label(r)} ({r.dataset})", (tokens, r.metrics.get("f1", 0.0)), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("tokens per question")
    ax.set_ylabel("F1 (95 % interval)")
    ax.set_title("score vs cost")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(_save(fig, out_dir / "score_vs_cost.png"))
    for dataset in sorted({r.dataset for r in main}):
        sub = [r for r in main if r.dataset == dataset]
        fig, ax = plt.subplots(figsize=(max(4, 1.5 * len(sub) + 2), 4))
        labels = [textwrap.fill(f"{_label(r)} · {r.setting}", 18) for r in sub]
        xs = range(len(sub))
        ax.bar([x - 0.2 for x in xs], [r.metrics.get("em", 0) for r in sub], width=0.4, label="EM",
               yerr=_errors(sub, "em"), capsize=3)
        ax.bar([x + 0.2 for x in xs], [r.metrics.get("f1", 0) for r in sub], width=0.4, label="F1",
               yerr=_errors(sub, "f1"), capsize=3)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_title(f"{dataset} (95 % intervals)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(_save(fig, out_dir / f"bars_{dataset}.png"))
    if pairs:
        paths.append(_forest(pairs, out_dir))
    return paths


def _forest(pairs: list[PairedRow], out_dir: Path) -> Path:
    """The differences to the baseline with their paired intervals, one line each, 0 marked."""
    import matplotlib.pyplot as plt

    shown = [p for p in pairs if not math.isnan(p.result.diff)]
    fig, ax = plt.subplots(figsize=(10, max(2.0, 0.35 * len(shown) + 1.2)))
    for y, p in enumerate(shown):
        r = p.result
        lo, hi = (r.diff - r.low, r.high - r.diff) if not math.isnan(r.low) else (0.0, 0.0)
        color = "C3" if r.significant else "C1" if r.excludes_zero else "C0"
        ax.errorbar([r.diff], [y], xerr=[[lo], [hi]], fmt="o", capsize=3, color=color)
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"{p.method} − {p.baseline}: {p.metric} ({p.dataset}, {p.stratum})"
                        + (" partial" if p.partial else "") for p in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("method − baseline, paired 95 % interval (red: excludes 0 and p < 0.05; orange: excludes 0 only)")
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return _save(fig, out_dir / "differences.png")


def _html_table(head: list[str], body: list[list[str]]) -> str:
    return ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body)
            + "</table>")


def html_report(rows: list[Row], images: list[Path], pairs: list[PairedRow] | None = None) -> str:
    cols = _present(rows)
    body = [[f"{r.dataset}/{r.split}", r.setting, r.name, r.stratum, _n_cell(r), str(r.failed)]
            + [_cell(r, c, "html") for c in cols] for r in rows]
    compared = ""
    if pairs:
        head = ["dataset", "setting", "stratum", "metric", "method", "vs", "n", "difference", "95 % interval",
                "excludes 0", "p", "win / tie / loss", f"n for ±{TARGET_HALF_WIDTH}"]
        cells = [[f"{p.dataset}/{p.split}", p.setting, p.stratum, p.metric, p.method, p.baseline, str(p.result.n),
                  _signed(p.result.diff), f"[{_signed(p.result.low)}, {_signed(p.result.high)}]",
                  _verdict(p.result), _p(p.result.p_value),
                  f"{p.result.wins} / {p.result.ties} / {p.result.losses}",
                  "–" if p.result.needed is None else str(p.result.needed)] for p in pairs]
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in dict.fromkeys(_pair_note(p) for p in pairs) if n)
        compared = ("<h2>Against the baseline</h2>" + _html_table(head, cells)
                    + (f"<ul>{notes}</ul>" if notes else ""))
    imgs = "".join(
        f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}"/></figure>' for p in images)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>hopqa report</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:nth-child(-n+4){text-align:left}"
        "th{background:#f0f0f0}figure{display:inline-block;margin:1em}</style></head><body>"
        "<h1>hopqa evaluation report</h1><p>Each figure with its 95 % bootstrap interval over the questions.</p>"
        + _html_table(_head(cols), body) + compared + imgs + "</body></html>"
    )


def build_report(run_paths: list[str | Path], out_dir: str | Path, stratify: bool = False,
                 long_pct: float = 98.5, short_pct: float = 1.5, plots: bool = True, by: Iterable[str] = (),
                 baseline: str | None = None, metrics: Iterable[str] = COMPARED,
                 seed: int = stats.SEED) -> tuple[str, Path]:
    """Write report.md, report.html (and PNG plots) and report.json into out_dir; return the
    Markdown (the table, and the comparisons with ``baseline``). ``ValueError`` when no run is
    of the baseline method."""
    runs = find_runs(run_paths)
    if not runs:
        raise FileNotFoundError(f"no results.jsonl under {', '.join(map(str, run_paths))}")
    rows = collect_rows(runs, stratify, long_pct, short_pct, by=by, seed=seed)
    pairs = compare_rows(rows, baseline, metrics, seed=seed) if baseline else []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = markdown_table(rows)
    if baseline:
        text += f"\n\n## Against the baseline, {_md(baseline)}\n\n" + comparison_table(pairs)
    write_atomic(out / "report.md", "# hopqa evaluation report\n\n" + text + "\n")
    images = _plots(rows, pairs, out) if plots else []
    write_atomic(out / "report.html", html_report(rows, images, pairs))
    write_atomic(out / "report.json", json.dumps({"rows": [r.to_dict() for r in rows],
                                                  "comparisons": [p.to_dict() for p in pairs],
                                                  "baseline": baseline, "seed": seed}, indent=1))
    return text, out
