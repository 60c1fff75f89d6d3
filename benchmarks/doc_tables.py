"""The docs' measured tables, rendered from results instead of typed by hand.

    .venv/bin/python benchmarks/doc_tables.py [--write] [--pictures]

A table in a docs page sits between two markers::

    <!-- table: NAME (source: WHERE) -->
    | ... |
    <!-- /table -->

and ``TABLES[NAME]`` renders it from stored results: the records of the runs it reports
(shipped under ``tests/fixtures/``, with their date, model and command in their ``about``), put
through ``hopqa report`` as a user would, or the figures a benchmark wrote as JSON
(``docs/results/``: ``benchmarks/presets.py --figures``, with the date, machine, model and
command in its ``about``). No measured number is typed by hand: a run that was not kept is run
again. ``--write`` rewrites every table in the docs; without it the script prints the tables
that differ and exits 1 if one does. ``--pictures`` also draws the report's plot of the
differences with their intervals into ``docs/benchmarks/intervals-differences.png`` (``make
screenshots`` does).
``tests/test_doc_tables.py`` runs the check in the test suite, so a table that no longer
matches its results (a changed statistic, a re-run, a hand edit) fails a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import json
import math
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hopqa.evaluation.report import Row

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
DOCS = ROOT / "docs"
MARKED = re.compile(r"(<!-- table: (?P<name>[\w-]+)[^>]*-->\n)(?P<body>.*?)(<!-- /table -->)", re.DOTALL)


def write_runs(source: Path, root: Path) -> list[Path]:
    """The runs stored in ``source`` (``{"runs": {path: {"config", "records", "questions"}}}``)
    written as ``hopqa eval`` writes them under ``root``; their directories."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    dirs = []
    for rel, run in data["runs"].items():
        out = root / rel
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(run["config"]), encoding="utf-8")
        if run.get("questions") is not None:
            (out / "questions.json").write_text(json.dumps(run["questions"]), encoding="utf-8")
        (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run["records"]), encoding="utf-8")
        dirs.append(out)
    return dirs


def report_of(source: Path, baseline: str, metrics: list[str], plots_to: Path | None = None) -> dict[str, Any]:
    """``hopqa report RUNS --baseline BASELINE --metrics ...`` of the stored runs: its JSON
    (with the plots written to ``plots_to``, when given)."""
    from hopqa.evaluation.report import build_report

    with tempfile.TemporaryDirectory(prefix="hopqa-doc-tables-") as tmp:
        dirs = write_runs(source, Path(tmp) / "runs")
        out = plots_to or Path(tmp) / "report"
        build_report(dirs, out, baseline=baseline, metrics=metrics, plots=plots_to is not None)
        return json.loads((out / "report.json").read_text(encoding="utf-8"))


def signed(x: float) -> str:
    """``+0.141`` / ``−0.083`` (a typographic minus, as the docs write it)."""
    return f"{x:+.3f}".replace("-", "−")


def excludes(c: dict[str, Any]) -> str:
    if c["significant"]:
        return "**yes**"
    return "yes, but p ≥ 0.05" if c["excludes_zero"] else "no"


#: Issue 32's comparisons on 30 MuSiQue questions: the runs' labels in the report -> the docs'.
INTERVAL_LABELS = {"ircot (off)": "ircot (free text)", "ircot (auto)": "ircot (JSON)",
                   "self-ask (auto)": "self-ask (JSON)", "self-ask (off)": "self-ask (free text)",
                   "self-dc": "self-dc (`prob`, JSON)", "gensco-stop": "gensco-stop (JSON)"}
METRIC_NAMES = {"f1": "F1", "support_recall": "sup. recall", "em": "EM"}


#: Issue 32's stored runs: 30 MuSiQue questions, Qwen2.5-1.5B (the intervals page's tables).
MUSIQUE30 = FIXTURES / "qwen_musique30.json.gz"


@functools.cache
def musique30_report() -> dict[str, Any]:
    """``hopqa report`` of ``MUSIQUE30`` against Retrieve-then-Read, made once for every table
    that reads it."""
    return report_of(MUSIQUE30, "retrieve-then-read", list(METRIC_NAMES))


def intervals_comparisons() -> str:
    """docs/benchmarks/intervals.md: every method against Retrieve-then-Read, paired."""
    report = musique30_report()
    by = {(c["method"], c["metric"]): c for c in report["comparisons"] if c["stratum"] == "all"}
    lines = [("| against Retrieve-then-Read | difference [95 % interval] | excludes 0 | p | win / tie / loss "
              "| n for ±0.05 |"), "|---|---|---|---|---|---|"]
    for label, shown in INTERVAL_LABELS.items():
        for metric, name in METRIC_NAMES.items():
            c = by[(label, metric)]
            n = f" ({c['n']} questions)" if c["n"] != 30 else ""
            needed = c["n_for_pm0.05"] if c["n_for_pm0.05"] is not None else "–"
            lines.append(f"| {shown}, {name}{n} | {signed(c['diff'])} [{signed(c['low'])}, {signed(c['high'])}] "
                         f"| {excludes(c)} | {c['p_value']:.3f} | {c['wins']} / {c['ties']} / {c['losses']} "
                         f"| {needed} |")
    return "\n".join(lines) + "\n"


#: Issue 32's runs in the order of the summary (the baseline first), by the report's label.
INTERVAL_RUNS = ("retrieve-then-read", "ircot (auto)", "ircot (off)", "self-ask (auto)", "self-ask (off)", "self-dc",
                 "gensco-stop")
#: The runs whose seconds a question are no model's time (the run was paused while it ran), by the
#: report's label: the note shown instead.
INTERVAL_SECONDS_NOTES = {"retrieve-then-read": "– (the run was paused for a measurement)",
                          "self-dc": "– (paused for measurements)", "gensco-stop": "– (paused for measurements)"}


def metric_counts(source: Path, metric: str) -> dict[str, int]:
    """The records of each run stored in ``source`` that carry ``metric``, by the run's path
    (a question answered without passages has no support figures)."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    return {rel: sum((r.get("metrics") or {}).get(metric) is not None for r in run["records"])
            for rel, run in data["runs"].items()}


def _report_row(row: dict[str, Any]) -> Row:
    """A row of the report's JSON as the report's own ``Row``, for its cell formatting."""
    from hopqa.evaluation.report import Row

    intervals = {key: (math.nan if low is None else low, math.nan if high is None else high)
                 for key, (low, high) in row["intervals"].items()}
    return Row(row["dataset"], row["split"], row["setting"], row["method"], row["stratum"], row["n"], row["failed"],
               row["metrics"], row["cost"], intervals, run_n=row["run_n"], asked=row["asked"], run=row["run"],
               label=row["label"])


#: The columns of the intervals page's summary (``interval_cells``).
SUMMARY_COLUMNS = ("method", "n", "EM", "F1", "sup. recall", "parsed", "LLM calls/q", "s/q")


@functools.cache
def interval_cells() -> dict[str, dict[str, str]]:
    """Each of issue 32's runs (by the report's label) as the intervals page's summary shows it,
    by column (``SUMMARY_COLUMNS``): its figures and their intervals as ``hopqa report`` writes
    them (``0.078 ±0.082``, a rate as ``91.9 % ±7.4 %``); LLM calls without theirs, a parse rate
    of 100 % without its (every step parsed: nothing to spread), ``(on N)`` after a figure over
    fewer questions than the run answered (support figures: the questions answered with
    passages), and a note instead of the seconds of a run that was paused while it ran
    (``INTERVAL_SECONDS_NOTES``)."""
    from hopqa.evaluation.report import COLUMNS, _cell, _n_cell

    rows = {row["label"]: row for row in musique30_report()["rows"] if row["stratum"] == "all"}
    column = {c[0]: c for c in COLUMNS}
    supported = metric_counts(MUSIQUE30, "support_recall")
    table = {}
    for label in INTERVAL_RUNS:
        data = rows[label]
        row = _report_row(data)
        on = next(n for rel, n in supported.items() if Path(data["run"]).as_posix().endswith("/" + rel))
        recall = _cell(row, column["support_recall"]) + (f" (on {on})" if on < row.n else "")
        parsed = row.metrics.get("parse_rate")
        parsed_cell = ("–" if parsed is None else "100 %" if parsed == 1
                       else _cell(row, column["parse_rate"]).replace("%", " %"))
        calls = column["llm_calls_per_q"][3].format(row.cost["llm_calls_per_q"])
        seconds = INTERVAL_SECONDS_NOTES.get(label) or _cell(row, column["seconds_per_q"])
        cells = [INTERVAL_LABELS.get(label, label), _n_cell(row), _cell(row, column["em"]), _cell(row, column["f1"]),
                 recall, parsed_cell, calls, seconds]
        table[label] = dict(zip(SUMMARY_COLUMNS, cells, strict=True))
    return table


def intervals_summary() -> str:
    """docs/benchmarks/intervals.md: each of issue 32's runs with its figures (``interval_cells``)."""
    lines = [_row(list(SUMMARY_COLUMNS)), "|" + "---|" * len(SUMMARY_COLUMNS)]
    lines += [_row(list(cells.values())) for cells in interval_cells().values()]
    return "\n".join(lines) + "\n"


#: ``benchmarks/presets.py``'s figures (a copy of its ``figures.json``).
PRESETS = DOCS / "results" / "presets.json"
#: The docs' names of the presets benchmark's runs (by the report's label).
PRESET_LABELS = {"ircot": "ircot (JSON)", "self-dc (defaults)": "self-dc, defaults (`verb`)",
                 "self-dc (small-model)": "self-dc, `small-model`"}


def _preset_label(label: str) -> str:
    if label in PRESET_LABELS:
        return PRESET_LABELS[label]
    method, _, variant = label.partition(" (")
    return {"defaults)": f"{method}, defaults", "small-model)": f"{method}, `small-model`"}.get(variant, label)


def _against(c: dict[str, Any] | None) -> str:
    if c is None:
        return "–"
    interval = f"{signed(c['diff'])} [{signed(c['low'])}, {signed(c['high'])}]"
    return (f"{'**' + interval + '**' if c['significant'] else interval}, p = {c['p_value']:.3f}, "
            f"{c['wins']} / {c['ties']} / {c['losses']}")


def presets_table(dataset: str) -> str:
    """docs/benchmarks/presets.md: each run of ``dataset`` (F1, the median seconds a question,
    F1 against Retrieve-then-Read on the questions both answered); a partial run is marked
    ``partial (n of N)``, a complete run of fewer questions than the table's longest ``first n``
    (``--limit n``), and its F1 is over its own n questions. A setting column when the dataset
    was measured in more than one setting."""
    figures = json.loads(PRESETS.read_text(encoding="utf-8"))
    with_setting = len({t["setting"] for t in figures["tables"] if t["dataset"] == dataset}) > 1
    head = ["method", "F1", "s/q (median)", "against Retrieve-then-Read, F1 [95 % interval], p, win / tie / loss"]
    head = (["setting"] if with_setting else []) + head
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for table in (t for t in figures["tables"] if t["dataset"] == dataset):
        against = {c["method"]: c for c in table["vs_retrieve_then_read"]}
        longest = max((run["n"] for run in table["runs"]), default=0)
        for run in table["runs"]:
            label = _preset_label(run["label"])
            if run["partial"]:
                label += f", partial ({run['n']} of {run['asked']})"
            elif run["n"] < longest:
                label += f", first {run['n']}"
            seconds = f"{run['median_seconds']:.0f}" if run["median_seconds"] is not None else "–"
            cells = [label, f"{run['f1']:.3f}", seconds, _against(against.get(run["label"]))]
            lines.append("| " + " | ".join(([table["setting"]] if with_setting else []) + cells) + " |")
    return "\n".join(lines) + "\n"


def _paired(c: dict[str, Any]) -> str:
    """A paired difference and its interval, bold when the interval excludes 0 with p < 0.05."""
    interval = f"{signed(c['diff'])} [{signed(c['low'])}, {signed(c['high'])}]"
    return f"**{interval}**" if c["p_value"] < 0.05 and (c["low"] > 0 or c["high"] < 0) else interval


def presets_against_defaults() -> str:
    """docs/benchmarks/presets.md: each preset against its own defaults, F1 on the same questions."""
    figures = json.loads(PRESETS.read_text(encoding="utf-8"))
    lines = ["| method | dataset | setting | n | preset − defaults, F1 [95 % interval] | p | win / tie / loss |",
             "|---|---|---|---|---|---|---|"]
    for table in figures["tables"]:
        for c in table["preset_vs_defaults"]:
            interval = _paired(c)
            lines.append(f"| {c['method']} | {table['dataset']} | {table['setting']} | {c['n']} | {interval} "
                         f"| {c['p_value']:.3f} | {c['wins']} / {c['ties']} / {c['losses']} |")
    return "\n".join(lines) + "\n"


#: The seed methods and datasets of issue 33's targets, as ``benchmarks/presets.py`` runs them.
SEED_METHODS = ("hgot", "gensco-stop", "self-dc", "leapquery", "tor")
TARGET_DATASETS = {"musique": "MuSiQue", "hotpotqa": "HotpotQA", "2wikimultihopqa": "2WikiMultihopQA"}
#: The questions a comparison must hold to count towards a target.
TARGET_N = 30


def presets_targets() -> str:
    """docs/benchmarks/presets.md: issue 33's first target as the figures stand — each seed
    method's preset against its defaults (F1, paired) in every dataset and setting, the number
    of questions where fewer than ``TARGET_N``, and on how many datasets of a setting the preset
    is above its defaults on ``TARGET_N`` questions (on fewer in brackets)."""
    tables = {(t["dataset"], t["setting"]): t for t in json.loads(PRESETS.read_text(encoding="utf-8"))["tables"]}
    rows = []
    for method in SEED_METHODS:
        for setting in ("distractor", "open"):
            cells, above, above_fewer = [], 0, 0
            for dataset in TARGET_DATASETS:
                table = tables.get((dataset, setting), {})
                c = next((c for c in table.get("preset_vs_defaults", []) if c["method"] == method), None)
                if c is None:
                    cells.append("–")
                    continue
                cells.append(_paired(c) + ("" if c["n"] >= TARGET_N else f" ({c['n']} q)"))
                if c["diff"] > 0:
                    above, above_fewer = (above + 1, above_fewer) if c["n"] >= TARGET_N else (above, above_fewer + 1)
            count = f"{above} of {len(TARGET_DATASETS)}" + (f" (+{above_fewer} on fewer)" if above_fewer else "")
            rows.append([method, setting, *cells, count])
    return _table(["method", "setting", *(f"{name}: preset − defaults" for name in TARGET_DATASETS.values()),
                   f"above on {TARGET_N} q"], rows)


def presets_second_target(dataset: str = "musique", setting: str = "open") -> str:
    """docs/benchmarks/presets.md: issue 33's second target as the figures stand — each seed
    method's preset against Retrieve-then-Read on MuSiQue in the open setting, F1, paired."""
    table = next(t for t in json.loads(PRESETS.read_text(encoding="utf-8"))["tables"]
                 if (t["dataset"], t["setting"]) == (dataset, setting))
    rows = []
    for method in SEED_METHODS:
        c = next((c for c in table["vs_retrieve_then_read"] if c["method"] == f"{method} (small-model)"), None)
        rows.append([method, "–", "", "", "", ""] if c is None else
                    [method, str(c["n"]), _paired(c), "yes" if c["low"] > 0 else "no", f"{c['p_value']:.3f}",
                     f"{c['wins']} / {c['ties']} / {c['losses']}"])
    return _table(["method", "n", "preset − Retrieve-then-Read, F1 [95 % interval]", "above, interval excludes 0",
                   "p", "win / tie / loss"], rows)


def demo_candidates(dataset: str = "musique", setting: str = "open", demo: str = "ircot") -> str:
    """docs/benchmarks/demo-method.md: every run of the presets benchmark in the setting ``hopqa
    ask`` works in, against the demo's method (``demo``) on the questions both answered (paired
    by id from each run's ``f1_by_id`` as ``hopqa report`` pairs runs: ``compare_by_id``)."""
    from hopqa.evaluation.report import compare_by_id

    figures = json.loads(PRESETS.read_text(encoding="utf-8"))
    table = next(t for t in figures["tables"] if t["dataset"] == dataset and t["setting"] == setting)
    runs = {run["label"]: run for run in table["runs"]}
    reference = runs[demo].get("f1_by_id")
    lines = [f"| method | F1 | s/q (median) | against {demo}, F1 [95 % interval], p, win / tie / loss |",
             "|---|---|---|---|"]
    for label, run in sorted(runs.items(), key=lambda item: -item[1]["f1"]):
        seconds = f"{run['median_seconds']:.0f}" if run["median_seconds"] is not None else "–"
        if label == demo:
            against = "(the demo's method)"
        elif reference is None:
            against = f"– ({demo}'s records are gone)"
        elif "f1_by_id" not in run:
            against = "– (its records are gone)"
        else:
            c = compare_by_id(run["f1_by_id"], reference)
            against = _against({**dataclasses.asdict(c), "significant": c.significant})
            against += f" ({c.n} questions)" if c.n != len(reference) else ""
        lines.append(f"| {_preset_label(label)} | {run['f1']:.3f} | {seconds} | {against} |")
    return "\n".join(lines) + "\n"


#: ``benchmarks/retrieval.py --figures``.
RETRIEVAL = DOCS / "results" / "retrieval.json"


def _ms(x: float) -> str:
    """Milliseconds as the docs write them: one decimal below 100, none above."""
    return f"{x:.1f}" if x < 100 else f"{x:.0f}"


def retrieval_table(part: str) -> str:
    """docs/benchmarks/speed.md: one part of ``docs/results/retrieval.json`` (engines, faiss,
    indexes, hnsw; recall and milvus by ``retrieval_recall_table``)."""
    rows = json.loads(RETRIEVAL.read_text(encoding="utf-8"))["rows"][part]
    columns: dict[str, list[tuple[str, Callable[[dict[str, Any]], str]]]] = {
        "engines": [("passages", lambda r: f"{r['passages']:,}"), ("engine", lambda r: r["engine"]),
                    ("build s", lambda r: f"{r['build_s']:.1f}"), ("index MB", lambda r: f"{r['index_mb']:.0f}"),
                    ("open s", lambda r: f"{r['open_s']:.2f}"), ("first query ms", lambda r: f"{r['first_ms']:.1f}"),
                    ("p50 ms", lambda r: f"{r['p50_ms']:.2f}"), ("p95 ms", lambda r: f"{r['p95_ms']:.2f}")],
        "faiss": [("vectors", lambda r: f"{r['vectors']:,}"), ("index", lambda r: r["index"]),
                  ("build s", lambda r: f"{r['build_s']:.1f}"), ("p50 ms", lambda r: f"{r['p50_ms']:.2f}"),
                  ("p95 ms", lambda r: f"{r['p95_ms']:.2f}"), ("recall@10 vs exact", lambda r: f"{r['recall_at_10']:.3f}")],
        "indexes": [("retriever", lambda r: r["retriever"]), ("build s", lambda r: f"{r['build_s']:.1f}"),
                    ("index MB", lambda r: f"{r['index_mb']:.0f}")],
        "hnsw": [("efSearch", lambda r: str(r["ef_search"])), ("recall@10 vs exact", lambda r: f"{r['recall_at_10']:.3f}"),
                 ("p50 ms", lambda r: f"{r['p50_ms']:.2f}"), ("p95 ms", lambda r: f"{r['p95_ms']:.2f}")],
    }[part]
    lines = ["| " + " | ".join(name for name, _ in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r) for _, cell in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def retrieval_recall_table(part: str) -> str:
    """docs/benchmarks/speed.md: recall of the gold supporting paragraphs on the demo corpus by
    retriever (``recall``) or by milvus-lite's search mode (``milvus``); the best of a dataset at
    each depth in bold (every one that ties it, to three decimals)."""
    rows = json.loads(RETRIEVAL.read_text(encoding="utf-8"))["rows"][part]
    what = "retriever" if part == "recall" else "mode"
    lines = [f"| dataset | {what} | R@5 | R@10 | R@20 | p50 ms | p95 ms |", "|---|---|---|---|---|---|---|"]
    best = {(r["dataset"], k): max(round(s[k], 3) for s in rows if s["dataset"] == r["dataset"])
            for r in rows for k in ("r5", "r10", "r20")}
    for r in rows:
        cells = [f"**{r[k]:.3f}**" if round(r[k], 3) == best[(r["dataset"], k)] else f"{r[k]:.3f}"
                 for k in ("r5", "r10", "r20")]
        lines.append(f"| {DATASET_NAMES.get(r['dataset'], r['dataset'])} | {r[what]} | {' | '.join(cells)} "
                     f"| {_ms(r['p50_ms'])} | {_ms(r['p95_ms'])} |")
    return "\n".join(lines) + "\n"


#: ``benchmarks/foundation.py --figures``.
FOUNDATION = DOCS / "results" / "foundation.json"


def foundation_table(part: str) -> str:
    """docs/benchmarks/speed.md: BM25 over the demo corpus (``bm25``), the embedded LLMs
    (``llm``) or the response cache (``cache``) from ``docs/results/foundation.json``."""
    rows = json.loads(FOUNDATION.read_text(encoding="utf-8"))["rows"][part]
    if part == "bm25":
        lines = ["| passages | build s | index MB | load s | query p50 / p95 ms | batch queries/s "
                 "| MuSiQue dev: a gold supporting paragraph in the top 10 |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['passages']:,} | {r['build_s']:.1f} | {r['index_mb']:.0f} | {r['load_s']:.2f} "
                  f"| {r['p50_ms']:.1f} / {r['p95_ms']:.1f} | {r['batch_qps']:,.0f} "
                  f"| {r['recall_at_10_any']:.0%} of {r['questions']} questions |" for r in rows]
    elif part == "llm":
        lines = ["| LLM | load s | generate, cold prompt (median of 3) | loglikelihood, cold / shared prefix |",
                 "|---|---|---|---|"]
        lines += [f"| {r['llm']} | {r['load_s']:.1f} | {r['generate_s']:.2f} s ({r['prompt_tokens']} + "
                  f"{r['completion_tokens']} tokens) | {r['loglikelihood_s']:.2f} s / "
                  f"{r['loglikelihood_shared_prefix_s']:.2f} s ({r['loglikelihood_tokens']} tokens after "
                  f"{r['context_tokens']}) |" for r in rows]
    else:
        lines = ["| calls | store ms a call | hit ms a call |", "|---|---|---|"]
        lines += [f"| {r['calls']} | {r['store_ms']:.2f} | {r['hit_ms']:.2f} |" for r in rows]
    return "\n".join(lines) + "\n"


def overhead_table() -> str:
    """docs/benchmarks/speed.md: each ``benchmarks/eval_overhead.py --figures`` file of
    ``docs/results/overhead-*.json``, a row per harness and method (1 and 8 workers)."""
    lines = [("| harness | method | peers rank by | questions | per LLM call | 1 → 8 workers, after start-up "
              "| start-up | end | cached re-run, 1 worker (% of first) |"), "|" + "---|" * 9]
    for path in sorted((DOCS / "results").glob("overhead-[0-9]*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        about = data["about"]
        ranking = "bm25s" if about["peer_ranking"] == "bm25" else "shared words"
        rows = data["rows"]
        for harness, method in dict.fromkeys((r["harness"], r["method"]) for r in rows):
            one = next(r for r in rows if (r["harness"], r["method"], r["workers"]) == (harness, method, 1))
            eight = next((r for r in rows if (r["harness"], r["method"], r["workers"]) == (harness, method, 8)), None)
            cached = (f"{one['cached_wall']:.2f} s ({100 * one['cached_wall'] / one['wall']:.1f} %)"
                      if one["cached_wall"] is not None else "– (no cache)")
            speedup = f"{eight['speedup_after_start']:.2f}×" if eight else "–"
            ranks = ranking if harness != "hopqa" else "(its BM25)"
            lines.append(f"| {harness} | {method} | {ranks} | {about['questions']} | {one['overhead_ms']:.1f} ms "
                         f"| {speedup} | {one['start']:.2f} s | {one['end']:.2f} s | {cached} |")
    return "\n".join(lines) + "\n"


def overhead_history_table() -> str:
    """docs/benchmarks/speed.md: the runs of ``benchmarks/eval_overhead.py --checkout ... --figures``
    in ``docs/results/overhead-history-*.json`` (hopqa at several commits and the peers, side by side
    in each run), a row per harness with the range over the runs of each figure (one value where
    the runs agree to the figure's precision)."""
    runs = [json.loads(p.read_text(encoding="utf-8"))["rows"]
            for p in sorted((DOCS / "results").glob("overhead-history-*.json"))]

    def spread(values: list[float], form: str, unit: str = "") -> str:
        low, high = (format(v, form) for v in (min(values), max(values)))
        return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"

    lines = ["| harness | runs | per LLM call | 1 → 8 workers, after start-up | start-up | end "
             "| cached re-run, 1 worker (% of first) |", "|" + "---|" * 7]
    for harness in dict.fromkeys(r["harness"] for rows in runs for r in rows):
        ones = [r for rows in runs for r in rows if r["harness"] == harness and r["workers"] == 1]
        eights = [r for rows in runs for r in rows if r["harness"] == harness and r["workers"] == 8]
        cached = [r for r in ones if r["cached_wall"] is not None]
        again = (spread([r["cached_wall"] for r in cached], ".2f", " s")
                 + f" ({spread([100 * r['cached_wall'] / r['wall'] for r in cached], '.1f', ' %')})"
                 if cached else "– (no cache)")
        lines.append(f"| {harness} | {len(ones)} | {spread([r['overhead_ms'] for r in ones], '.1f', ' ms')} "
                     f"| {spread([r['speedup_after_start'] for r in eights], '.2f', '×') if eights else '–'} "
                     f"| {spread([r['start'] for r in ones], '.2f', ' s')} | {spread([r['end'] for r in ones], '.2f', ' s')} "
                     f"| {again} |")
    return "\n".join(lines) + "\n"


def _figures(name: str) -> dict[str, Any]:
    """The figures file ``docs/results/NAME.json`` a benchmark wrote with ``--figures``."""
    return json.loads((DOCS / "results" / f"{name}.json").read_text(encoding="utf-8"))


def _figure_rows(name: str) -> list[dict[str, Any]]:
    """The ``rows`` of the figures file ``docs/results/NAME.json``."""
    return _figures(name)["rows"]


def _names_after(prefix: str) -> list[str]:
    """What follows ``prefix`` in the names of the figures files ``docs/results/PREFIX*.json``
    (the datasets of a benchmark that keeps one file a dataset), sorted."""
    return sorted(p.stem.removeprefix(prefix) for p in (DOCS / "results").glob(f"{prefix}*.json"))


def call_layers_table(rows: list[dict[str, Any]] | None = None) -> str:
    """docs/benchmarks/speed.md: ``benchmarks/call_layers.py --figures`` (``docs/results/call-layers.json``,
    or ``rows`` as that script measured them), the milliseconds of one call at each layer and what each adds."""
    rows = rows if rows is not None else _figure_rows("call-layers")
    lines = ["| layer | ms a call | added by the layer |", "|---|---|---|"]
    previous = None
    for row in rows:
        added = f"{row['ms'] - previous:+.2f}" if previous is not None else "–"
        lines.append(f"| {row['layer']} | {row['ms']:.2f} | {added} |")
        previous = row["ms"]
    return "\n".join(lines) + "\n"


def decode_batch_table(rows: list[dict[str, Any]] | None = None) -> str:
    """docs/llm-backends.md: ``benchmarks/decode_batch.py --figures`` (``docs/results/decode-batch.json``,
    or ``rows`` as that script measured them): a decoding step of n sequences, per step, per token,
    and its tokens per second against the first row's."""
    rows = rows if rows is not None else _figure_rows("decode-batch")
    lines = ["| sequences | ms / step | ms / token | tokens / s | against 1 sequence |", "|---|---|---|---|---|"]
    base = None
    for row in rows:
        rate = row["sequences"] / row["ms_step"] * 1000
        base = base or rate
        lines.append(f"| {row['sequences']} | {row['ms_step']:.1f} | {row['ms_step'] / row['sequences']:.1f} "
                     f"| {rate:.1f} | {rate / base:.2f}× |")
    return "\n".join(lines) + "\n"


def batched_samples_table(rows: list[dict[str, Any]] | None = None) -> str:
    """docs/llm-backends.md: ``benchmarks/batched_samples.py --figures`` (``docs/results/batched-samples.json``,
    or ``rows`` as that script measured them): per ``n``, seconds a request with the samples decoded
    together and drawn one by one, and how many samples agree."""
    rows = rows if rows is not None else _figure_rows("batched-samples")
    lines = ["| n | requests | s / request batched | s / request one by one | speed-up "
             "| prompt tokens evaluated batched / one by one | samples identical | same first token |",
             "|" + "---|" * 8]
    for r in rows:
        lines.append(f"| {r['n']} | {r['requests']} | {r['batched_s']:.1f} | {r['alone_s']:.1f} "
                     f"| {r['alone_s'] / r['batched_s']:.2f}× | {r['batched_evaluated']:,} / {r['alone_evaluated']:,} "
                     f"| {r['identical']} / {r['samples']} | {r['same_first_token']} / {r['samples']} |")
    return "\n".join(lines) + "\n"


def rerank_table(files: list[list[dict[str, Any]]] | None = None) -> str:
    """docs/retrieval.md: ``benchmarks/rerank.py --figures``, one file per version of the LLM
    judge's prompt (``docs/results/rerank-shown-7.json``, the form that showed a score, then
    ``docs/results/rerank.json``, then the expected-score judge's ``rerank-expected.json``; or
    ``files``, each a list of rows as that script measured them): per dataset and reranker,
    Recall@5 of the gold supporting paragraphs, how often the kept set changed and the top 5 all
    tied, the distinct scores and the scores given most often."""
    files = files if files is not None else [_figure_rows(name) for name in ("rerank-shown-7", "rerank", "rerank-expected")]
    lines = ["| dataset | reranker | LLM reply form | n | Recall@5 | kept set changed | top 5 all tied "
             "| distinct scores / q | most given | s / q |", "|" + "---|" * 10]
    for rows in files:
        for r in rows:
            form = r.get("form", "")
            form = f"`{form[form.index('{'):form.rindex('}') + 1]}`" if "{" in form else "–"
            most = ", ".join(f"{s:g} ×{c}" for s, c in r["most_given"]) if r["reranker"] == "llm" else ""
            name = "none (BM25's order)" if r["reranker"] == "none" else r["reranker"]
            lines.append(f"| {r['dataset']} | {name} | {form} | {r['questions']} | {r['recall']:.3f} "
                         f"| {r['changed']} of {r['questions']} | {r['tied']:.0%} | {r['distinct']:.1f} | {most or '–'} "
                         f"| {r['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def loglikelihood_table(rows: list[dict[str, Any]] | None = None) -> str:
    """docs/llm-backends.md: ``benchmarks/loglikelihood.py --figures`` (``docs/results/loglikelihood.json``,
    or ``rows`` as that script measured them): the embedded model scoring GenSco's pairs with the
    continuation's rows asked for in batches of each size."""
    rows = rows if rows is not None else _figure_rows("loglikelihood")
    return _table(["continuation tokens a batch", "pairs", "continuation tokens / pair", "s / pair (median)",
                   "s in all", "speed-up", "largest logprob difference"],
                  ([str(r["rows_per_batch"]), str(r["pairs"]), f"{r['tokens_per_pair']:.1f}", f"{r['median_s']:.3f}",
                    f"{r['total_s']:.1f}", f"{r['speedup']:.2f}×", f"{r['max_diff']:.1e}"] for r in rows))

def prefix_cache_table(rows: list[dict[str, Any]] | None = None) -> str:
    """docs/llm-backends.md: ``benchmarks/prefix_cache.py --figures`` (``docs/results/prefix-cache.json``,
    or ``rows`` as that script measured them): per method, with the embedded model's prefix cache
    off and on, the LLM calls, prompt tokens sent and evaluated, completion tokens and seconds a
    question, the speed-up and what stayed identical."""
    rows = rows if rows is not None else _figure_rows("prefix-cache")

    def cells(r: dict[str, Any]) -> list[str]:
        share = r["evaluated_per_q"] / r["sent_per_q"] if r["sent_per_q"] else 0.0
        same = [f"{r[k]} / {r['shared']}" if r["shared"] is not None else "" for k in ("answers_identical",
                                                                                        "outputs_identical")]
        return [r["method"] + (f" ({' '.join(r['options'])})" if r["options"] else ""), r["setting"], str(r["n"]),
                f"{r['calls_per_q']:.1f}", f"{r['sent_per_q']:,.0f}", f"{r['evaluated_per_q']:,.0f} ({share:.0%})",
                f"{r['completion_per_q']:,.0f}",
                f"{r['seconds_per_q']:.1f}" + (f" ({r['speedup']:.2f}×)" if r["speedup"] else ""), *same,
                f"{r['peak_rss_mb']:,.0f} MB" if r["peak_rss_mb"] else ""]

    return _table(["method", "prefix cache", "n", "LLM calls / q", "prompt tokens sent / q", "evaluated / q",
                   "completion / q", "s / q", "answers identical", "LLM outputs identical", "peak RSS"],
                  map(cells, rows))

def prefix_share_table(rows: list[dict[str, Any]] | None = None) -> str:
    """docs/llm-backends.md: ``benchmarks/prefix_share.py --figures`` (``docs/results/prefix-share.json``,
    or ``rows`` as that script measured them): per run, the share of its prompt characters that
    repeats the start of the previous prompt and of any earlier prompt of the same question."""
    rows = rows if rows is not None else _figure_rows("prefix-share")
    return _table(["run", "LLM", "n", "LLM calls / q", "prompt characters / q", "repeats the previous prompt",
                   "repeats an earlier prompt"],
                  ([r["run"], r["llm"] or "–", str(r["n"]), f"{r['calls_per_q']:.1f}", f"{r['chars_per_q']:,.0f}",
                    f"{r['previous']:.0%}", f"{r['earlier']:.0%}"] for r in rows))


def prefix_cache_memory_table(data: dict[str, Any] | None = None) -> str:
    """docs/llm-backends.md: ``benchmarks/prefix_cache_memory.py --figures``
    (``docs/results/prefix-cache-memory.json``, or ``data`` as that script wrote it): the model
    loaded with nothing cached, then every row the script printed as the cache filled up to its
    budget and evicted past it: prompts and tokens sent, the cache's entries and MiB, evictions,
    resident memory and its peak."""
    if data is None:
        data = _figures("prefix-cache-memory")
    loaded = data["about"]["loaded_rss_mb"]
    return _table(["prompts", "tokens sent", "entries", "cache MiB", "evictions", "RSS MiB", "RSS − loaded",
                   "peak RSS MiB", "s"],
                  [["0 (loaded)", "0", "0", "0", "0", f"{loaded:,.0f}", "", "", ""]]
                  + [[str(r["prompts"]), f"{r['tokens_sent']:,}", str(r["entries"]), f"{r['cache_mb']:,.0f}",
                      str(r["evictions"]), f"{r['rss_mb']:,.0f}", f"{r['rss_over_loaded_mb']:+,.0f}",
                      f"{r['peak_rss_mb']:,.0f}", f"{r['seconds']:.0f}"] for r in data["rows"]])


#: The columns of ``benchmarks/tree_of_reviews.py``'s table (the paper's Tables 1, 2 and 5).
TREE_OF_REVIEWS_COLUMNS = ("method", "n", "EM", "F1", "Recall@15", "#API", "#Doc", "#Doc/#API", "#Evidence", "parsed",
                           "parse fallback", "s/q")


def _dash(metrics: dict[str, Any], key: str, form: str = "{:.2f}") -> str:
    """``metrics[key]`` formatted with ``form``, or "–" where the run has no such figure."""
    return form.format(metrics[key]) if metrics.get(key) is not None else "–"


def _tree_of_reviews_cells(row: dict[str, Any]) -> list[str]:
    """A row of ``benchmarks/tree_of_reviews.py --figures`` as its table's cells, "–" where the
    method has no such figure."""
    m, c = row["metrics"], row["cost"]
    return [row["method"], str(row["n"]), f"{m.get('em', 0):.2f}", f"{m.get('f1', 0):.2f}",
            _dash(m, "support_recall"), f"{c['llm_calls_per_q']:.1f}", _dash(m, "docs_reviewed", "{:.1f}"),
            _dash(m, "docs_per_call", "{:.1%}"), _dash(m, "evidence", "{:.1f}"), _dash(m, "parse_rate", "{:.1%}"),
            _dash(m, "parse_fallback_rate", "{:.1%}"), f"{c['seconds_per_q']:.0f}"]


def _tree_of_reviews_rows(dataset: str, rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    rows = rows if rows is not None else _figure_rows("tree-of-reviews")
    mine = [r for r in rows if r["dataset"] == dataset]
    if not mine:
        raise KeyError(f"no {dataset} rows in the Tree of Reviews figures")
    return mine


def tree_of_reviews_datasets() -> list[str]:
    """The datasets ``docs/results/tree-of-reviews.json`` has rows of (none before the script wrote
    it): each has its ``tree-of-reviews-…`` table."""
    if not (DOCS / "results" / "tree-of-reviews.json").is_file():
        return []
    return list(dict.fromkeys(r["dataset"] for r in _figure_rows("tree-of-reviews")))


def tree_of_reviews_table(dataset: str, rows: list[dict[str, Any]] | None = None) -> str:
    """docs/benchmarks/tree-of-reviews.md: ``benchmarks/tree_of_reviews.py --figures``
    (``docs/results/tree-of-reviews.json``, or ``rows`` as that script measured them), the rows of
    ``dataset``: per method the paper's columns from each run's summary and cost."""
    return _table(list(TREE_OF_REVIEWS_COLUMNS), map(_tree_of_reviews_cells, _tree_of_reviews_rows(dataset, rows)))


def tree_of_reviews_row(dataset: str, method: str) -> dict[str, str]:
    """``method``'s row of the Tree of Reviews table of ``dataset`` by column, from
    ``docs/results/tree-of-reviews.json``."""
    row = next(r for r in _tree_of_reviews_rows(dataset) if r["method"] == method)
    return dict(zip(TREE_OF_REVIEWS_COLUMNS, _tree_of_reviews_cells(row), strict=True))


def _demo_method_label(row: dict[str, Any]) -> str:
    """A candidate of ``benchmarks/demo_choice.py`` as the table names it: the method, then its
    ``--set`` options and its LLM spec's query (``?logits_all=1``) in code."""
    extras = [*row.get("options", []), *(["?" + row["llm"].split("?", 1)[1]] if "?" in row.get("llm", "") else [])]
    return row["method"] + (" (" + ", ".join(f"`{x}`" for x in extras) + ")" if extras else "")


def _pooled(runs: list[dict[str, Any]], get: Callable[[dict[str, Any]], float]) -> float:
    """A per-question figure over several runs' questions pooled: each run's weighted by its ``n``."""
    return sum(get(r) * r["n"] for r in runs) / sum(r["n"] for r in runs)


def demo_method_rows(rows: list[dict[str, Any]] | None = None,
                     methods: tuple[str, ...] | None = None) -> list[dict[str, str]]:
    """Each candidate of ``benchmarks/demo_choice.py --figures`` (``docs/results/demo-method.json``,
    or ``rows`` as that script measured them, one per candidate and dataset) as the demo-method
    table's cells by column: EM / F1 per dataset and on all of them ("both": the questions
    pooled), LLM calls and seconds a question over all, the failed questions; with ``methods``,
    the candidates of those methods only (the columns stay every dataset measured)."""
    rows = rows if rows is not None else _figure_rows("demo-method")
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    out = []
    for label in dict.fromkeys(r["label"] for r in rows if methods is None or r["method"] in methods):
        mine = {r["dataset"]: r for r in rows if r["label"] == label}
        runs = list(mine.values())
        cells = {"method": _demo_method_label(next(iter(mine.values())))}
        for d in datasets:
            r = mine.get(d)
            cells[f"{DATASET_NAMES.get(d, d)} EM / F1"] = (
                f"{r['metrics'].get('em', 0):.2f} / {r['metrics'].get('f1', 0):.2f}" if r else "–")
        em = _pooled(runs, lambda r: r["metrics"].get("em", 0))
        f1 = _pooled(runs, lambda r: r["metrics"].get("f1", 0))
        cells[("both" if len(datasets) == 2 else "all") + " EM / F1"] = f"{em:.2f} / {f1:.2f}"
        cells["LLM calls/q"] = f"{_pooled(runs, lambda r: r['cost']['llm_calls_per_q']):.1f}"
        cells["s/q"] = f"{_pooled(runs, lambda r: r['cost']['seconds_per_q']):.0f}"
        cells["failed"] = str(sum(r["failed"] for r in runs))
        out.append(cells)
    return out


def demo_method_table(rows: list[dict[str, Any]] | None = None, methods: tuple[str, ...] | None = None) -> str:
    """docs/benchmarks/demo-method.md: ``benchmarks/demo_choice.py --figures``, a row a candidate
    (``demo_method_rows``); with ``methods``, the rows of those methods only (a method page shows
    its own beside Retrieve-then-Read's)."""
    cells = demo_method_rows(rows, methods)
    return _table(list(cells[0]), (list(c.values()) for c in cells))


#: The method pages that show their demo-method row (``demo-method-PAGE``) and the methods each shows.
DEMO_METHOD_PAGES: dict[str, tuple[str, ...]] = {
    page: ("retrieve-then-read", page) for page in ("self-ask", "self-dc", "iter-retgen", "ircot", "react", "hgot")
} | {"gensco": ("retrieve-then-read", "gensco-stop")}


#: The columns of a structured-outputs table (``benchmarks/structured_outputs.py``).
STRUCTURED_COLUMNS = ("method", "structured", "n", "EM", "F1", "sup. recall", "parsed", "fallback", "LLM calls/q",
                      "s/q", "RtR F1 on the same questions")


def _structured_cells(row: dict[str, Any]) -> list[str]:
    """A row of ``benchmarks/structured_outputs.py --figures`` as its table's cells, "–" where the
    method has no such figure (Retrieve-then-Read has no structured step, nothing to parse)."""
    m, c = row["metrics"], row["cost"]
    same = f"{row['rtr_f1_same']:.2f} ({row['rtr_n_same']})" if row.get("rtr_f1_same") is not None else "–"
    return [row["method"], row["structured"] or "–", str(row["n"]), f"{m.get('em', 0):.2f}", f"{m.get('f1', 0):.2f}",
            f"{m.get('support_recall', 0):.2f}", _dash(m, "parse_rate", "{:.1%}"),
            _dash(m, "parse_fallback_rate", "{:.1%}"),
            f"{c['llm_calls_per_q']:.1f}", f"{c['seconds_per_q']:.0f}", same]


def structured_outputs_datasets() -> list[str]:
    """The datasets measured by ``benchmarks/structured_outputs.py --figures`` (a file a dataset,
    ``docs/results/structured-outputs-DATASET.json``: each dataset is a run of hours of its own):
    each has its ``structured-outputs-DATASET`` table; in ``DATASET_NAMES``' order (the pages'
    prose: MuSiQue first), any other after them."""
    order = list(DATASET_NAMES)
    return sorted(_names_after("structured-outputs-"),
                  key=lambda d: (order.index(d) if d in order else len(order), d))


def structured_outputs_rows(dataset: str, rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The rows of ``dataset`` in ``docs/results/structured-outputs-DATASET.json`` (or in ``rows``)."""
    rows = rows if rows is not None else _figure_rows(f"structured-outputs-{dataset}")
    mine = [r for r in rows if r["dataset"] == dataset]
    if not mine:
        raise KeyError(f"no {dataset} rows in the structured-outputs figures")
    return mine


def structured_outputs_table(dataset: str, rows: list[dict[str, Any]] | None = None) -> str:
    """docs/benchmarks/structured-outputs.md: ``benchmarks/structured_outputs.py --figures``
    (``docs/results/structured-outputs-DATASET.json``, or ``rows`` as that script measured them),
    the rows of ``dataset``: per method and mode (``structured=auto`` / ``off``) its answers, parse
    and fallback rates, cost, and Retrieve-then-Read's F1 on the same questions."""
    return _table(list(STRUCTURED_COLUMNS), map(_structured_cells, structured_outputs_rows(dataset, rows)))


def structured_outputs_row(dataset: str, method: str, mode: str | None = None) -> dict[str, str]:
    """``method``'s row (in ``mode``: ``auto`` / ``off``, none for Retrieve-then-Read) of the
    structured-outputs table of ``dataset``, by column."""
    row = next(r for r in structured_outputs_rows(dataset) if r["method"] == method and r["structured"] == mode)
    return dict(zip(STRUCTURED_COLUMNS, _structured_cells(row), strict=True))


#: The method pages that show their structured-outputs rows (``structured-outputs-PAGE``): the
#: methods of each, beside Retrieve-then-Read's.
STRUCTURED_PAGES: dict[str, tuple[str, ...]] = {
    "ircot": ("retrieve-then-read", "ircot"), "self-ask": ("retrieve-then-read", "self-ask"),
    "self-dc": ("retrieve-then-read", "self-dc", "self-dc-verb"), "gensco": ("retrieve-then-read", "gensco-stop"),
    "hgot": ("retrieve-then-read", "hgot")}


def structured_outputs_page_table(methods: tuple[str, ...], files: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """A method page's structured-outputs rows: those of ``methods`` on every dataset measured
    (``docs/results/structured-outputs-DATASET.json``, or ``files`` by dataset), a dataset column
    first."""
    files = files if files is not None else {
        d: _figure_rows(f"structured-outputs-{d}") for d in structured_outputs_datasets()}
    return _table(["dataset", *STRUCTURED_COLUMNS],
                  ([DATASET_NAMES.get(d, d), *_structured_cells(r)] for d, rows in files.items()
                   for r in structured_outputs_rows(d, rows) if r["method"] in methods))


def structured_confidences_table(dataset: str, histograms: list[dict[str, Any]] | None = None) -> str:
    """docs/benchmarks/structured-outputs.md: the Self-DC confidences of
    ``benchmarks/structured_outputs.py --figures`` (its ``confidence_histograms``, or
    ``histograms``) of ``dataset``, a row per variant and mode: how many confidence calls, and
    how many fell in each tenth (0.9 holds 1.0)."""
    if histograms is None:
        histograms = _figures(f"structured-outputs-{dataset}").get("confidence_histograms", [])
    mine = [h for h in histograms if h["dataset"] == dataset]
    if not mine:
        raise KeyError(f"no {dataset} confidence histograms in the structured-outputs figures")
    return _table(["method", "structured", "values", *(f"{k / 10:.1f}" for k in range(10))],
                  ([h["method"], h["structured"], str(sum(h["bins"])), *map(str, h["bins"])] for h in mine))


def gensco_answer_datasets() -> list[str]:
    """The datasets ``benchmarks/gensco_answer.py --figures`` measured (a file a dataset,
    ``docs/results/gensco-answer-DATASET.json``): each has its ``gensco-answer-DATASET`` table."""
    return _names_after("gensco-answer-")


def gensco_answer_table(rows: list[dict[str, Any]] | None = None, dataset: str | None = None) -> str:
    """docs/benchmarks/structured-outputs.md: GenSco's answers re-asked with ``answer=short`` on
    the passages its stored walks selected (``benchmarks/gensco_answer.py --figures``,
    ``docs/results/gensco-answer-DATASET.json``, or ``rows`` as that script measured them): per
    dataset and mode EM and F1 of the stored (Table 6) answers and of the short ones."""
    rows = rows if rows is not None else _figure_rows(f"gensco-answer-{dataset}")
    return _table(["dataset", "structured", "n", "EM paper", "F1 paper", "EM short", "F1 short"],
                  ([DATASET_NAMES.get(r["dataset"], r["dataset"]), r["structured"], str(r["n"]),
                    f"{r['paper']['em']:.2f}", f"{r['paper']['f1']:.2f}", f"{r['short']['em']:.2f}",
                    f"{r['short']['f1']:.2f}"] for r in rows))


#: The metrics of a row of ``benchmarks/leapquery.py``'s table, in the order of its columns.
LEAPQUERY_METRICS = ("support_recall", "rouge_l", "bertscore", "em", "f1")


def leapquery_rerankers_table(rows: list[dict[str, Any]] | None = None) -> str:
    """docs/methods/leapquery.md: ``benchmarks/leapquery.py --figures``
    (``docs/results/leapquery-rerankers.json``, or ``rows`` as that script measured them): per
    method and LeapQuery variant its reranker, the paper's metrics, the cost, and its F1 against
    Retrieve-then-Read's on the same questions."""
    rows = rows if rows is not None else _figure_rows("leapquery-rerankers")

    def cells(r: dict[str, Any]) -> list[str]:
        c = r["vs_retrieve_then_read"]
        return [r["method"], r["rerank"], str(r["n"]), *(f"{r[k]:.3f}" if r[k] is not None else "–" for k in LEAPQUERY_METRICS),
                f"{r['parse_rate']:.1%}" if r["parse_rate"] is not None else "–", f"{r['llm_calls_per_q']:.1f}",
                f"{r['retrieval_calls_per_q']:.1f}", f"{r['seconds_per_q']:.0f}",
                f"{signed(c['diff'])} [{signed(c['low'])}, {signed(c['high'])}], {c['wins']} / {c['ties']} / {c['losses']}"
                if c is not None else "–"]

    return _table(["method", "rerank", "n", "Recall@5", "ROUGE-L", "BERTScore", "EM", "F1", "parsed", "LLM calls/q",
                   "retrievals/q", "s/q", "F1 − Retrieve-then-Read [95 %], W / T / L"], map(cells, rows))


def eval_stream_table(rows: list[dict[str, Any]] | None = None) -> str:
    """docs/reliability.md: ``benchmarks/eval_stream.py --figures`` (``docs/results/eval-stream.json``,
    a row a run: "before (7026ae7)" from a worktree of that commit, "now"), what a large question
    file costs ``hopqa eval`` before its first answer and at Ctrl-C."""
    rows = rows if rows is not None else _figure_rows("eval-stream")
    lines = ["| | first answer | peak memory | after Ctrl-C | warning lines | requests after Ctrl-C |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        after = (f"exit {r['returncode']} after {r['exit_s']:.1f} s" if r["exit_s"] is not None
                 else f"still running after {r['exit_timeout']:g} s (killed)")
        first = f"{r['first_s']:.1f} s" if r["first_s"] is not None else "none"
        lines.append(f"| {r['label']} | {first} | {r['peak_mb']:,.0f} MB | {after} | {r['warning_lines']:,} "
                     f"| {r['requests_after']:,} |")
    return "\n".join(lines) + "\n"


def calibration_table() -> str:
    """docs/methods/self-dc.md: ``hopqa calibrate``'s points on Qwen2.5-1.5B
    (``docs/results/calibrate-self-dc.json``, its ``calibration.json`` with an ``about``)."""
    from hopqa.evaluation.calibrate import markdown_table

    data = _figures("calibrate-self-dc")
    return markdown_table(data["points"], data["metric"])


def every_method_table(methods: tuple[str, ...] | None = None) -> str:
    """docs/benchmarks/every-method.md: each ``benchmarks/eval_methods.py --figures`` file of
    ``docs/results/every-method-*.json``, a row per method (its summary's metrics and cost per
    question: parse rate where the method has structured steps), each file's date and model
    beside its rows; with ``methods``, those methods' rows only (their page; each row named by
    its method when the page shows more than one, as GenSco's three variants)."""
    first = "dataset, setting | n" if methods else "method"
    lines = [(f"| {first} | measured | EM | F1 | sup. recall | parsed | LLM calls/q | prompt tok/q | compl. tok/q "
              "| retrievals/q | s/q | failed |"), "|" + "---|" * (13 if methods else 12)]
    for path in sorted((DOCS / "results").glob("every-method-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        about = data["about"]
        when = f"{about['date']}, {about['llm'].removeprefix('embedded:')}"
        for row in data["rows"]:
            if methods is not None and row["method"] not in methods:
                continue
            m, c = row["metrics"], row["cost"]
            options = f" (`{' '.join(row['options'])}`)" if row["options"] else ""
            label = row["method"] + options
            if methods:
                label = (f"{row['method'] + ': ' if len(methods) > 1 else ''}"
                         f"{DATASET_NAMES.get(about['dataset'], about['dataset'])} {about['split']}, {about['setting']}"
                         f"{options} | {row['n']}")
            sup = f"{m['support_recall']:.2f}" if "support_recall" in m else "–"
            parsed = f"{100 * m['parse_rate']:.0f} %" if m.get("parse_rate") is not None else "–"
            lines.append(f"| {label} | {when} | {m.get('em', 0):.3f} | {m.get('f1', 0):.3f} | {sup} | {parsed} "
                         f"| {c['llm_calls_per_q']:.1f} | {c['prompt_tokens_per_q']:.0f} "
                         f"| {c['completion_tokens_per_q']:.0f} | {c['retrieval_calls_per_q']:.1f} "
                         f"| {c['seconds_per_q']:.1f} | {row['failed']} |")
    return "\n".join(lines) + "\n"


def before_after_names() -> list[str]:
    """The changes measured before and after (``docs/results/NAME-before.json`` beside
    ``NAME-after.json``): each has its ``NAME`` table (``before_after_table``)."""
    return sorted(p.name.removesuffix("-before.json") for p in (DOCS / "results").glob("*-before.json")
                  if p.with_name(p.name.replace("-before.json", "-after.json")).is_file())


def before_after_table(name: str, files: dict[str, dict[str, Any]] | None = None) -> str:
    """A change measured before and after it: ``benchmarks/eval_methods.py --figures`` run on the
    commit before the change and on the commit after it (a ``git worktree`` of each on
    ``PYTHONPATH``; ``docs/results/NAME-before.json`` and ``NAME-after.json``, or ``files`` by
    "before" / "after"), a row per method of each: the commit that ran (``about.hopqa``), the date,
    the answer and support metrics and the cost per question ("–" for a metric that version did
    not compute)."""
    files = files if files is not None else {when: _figures(f"{name}-{when}") for when in ("before", "after")}
    lines = ["| method, run | hopqa | measured | EM | F1 | tok. P / R | support R / P / F1 | K-prec | calls/q "
             "| prompt tok/call | retrievals/q | s/q |", "|" + "---|" * 12]

    for when in ("before", "after"):
        about = files[when]["about"]
        for row in files[when]["rows"]:
            m, c = row["metrics"], row["cost"]
            per_call = c["prompt_tokens_per_q"] / c["llm_calls_per_q"] if c["llm_calls_per_q"] else 0.0
            lines.append(f"| {row['method']}, {when} | `{about.get('hopqa', '?')}` | {about['date']} "
                         f"| {_dash(m, 'em', '{:.3f}')} | {_dash(m, 'f1', '{:.3f}')} "
                         f"| {_dash(m, 'precision')} / {_dash(m, 'recall')} "
                         f"| {_dash(m, 'support_recall')} / {_dash(m, 'support_precision')} / {_dash(m, 'support_f1')} "
                         f"| {_dash(m, 'k_precision')} | {c['llm_calls_per_q']:.1f} | {per_call:,.0f} "
                         f"| {c['retrieval_calls_per_q']:.1f} | {c['seconds_per_q']:.1f} |")
    return "\n".join(lines) + "\n"


DATASET_NAMES = {"musique": "MuSiQue", "hotpotqa": "HotpotQA", "2wikimultihopqa": "2WikiMultihopQA"}
#: The method pages that show rows of the every-method figures (``every-method-PAGE``): the
#: methods of each.
EVERY_METHOD_PAGES: dict[str, tuple[str, ...]] = {
    **{name: (name,) for name in ("direct", "cot", "genread", "retrieve-then-read", "self-ask", "react", "ircot",
                                  "iter-retgen", "self-dc", "tor", "cor", "leapquery", "hgot")},
    "gensco": ("gensco-stop", "gensco-max", "gensco-no-qd"),
}


def _cell(value: Any) -> str:
    """A value as a table cell: code, with ``|`` escaped."""
    text = json.dumps(value) if isinstance(value, (list, dict)) else ("None" if value is None else repr(value))
    return "`" + text.replace("|", "\\|") + "`"


def _range(item: dict[str, Any]) -> str:
    """An option's allowed values: its choices, its range, what a resource option names (``–``
    where none is declared)."""
    if "resource" in item:
        return f"a {item['resource']} (resource option)"
    if "choices" in item:
        return ", ".join(_cell(c) for c in item["choices"]) + (", `None`" if item["optional"] else "")
    if "range" in item:
        low, high = item["range"]
        low_text = f"> {item['above']:g}" if item.get("above") is not None else _number(low)
        return f"{low_text} – {_number(high)}" + (" (each)" if item.get("items") else "")
    return "–"


def _number(x: float | str | None) -> str:
    if x is None:
        return "∞"
    if isinstance(x, str):
        return x
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def options_table(name: str) -> str:
    """The options of the method registered as ``name``, from its config (``hopqa methods``,
    ``GET /v1/methods``): type, default, allowed values, the service's default cap and the
    ``small-model`` preset's value where it sets one."""
    from hopqa.methods import METHODS, get_method_class
    from hopqa.methods.base import normalize_name
    from hopqa.server.catalog import describe_options
    from hopqa.server.settings import DEFAULT_OPTION_CAPS

    cls = get_method_class(name)
    preset = cls.presets.get("small-model")
    declared = {**{f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
                   for f in dataclasses.fields(cls.Config)}, **METHODS.preset(normalize_name(name))}
    caps = {**DEFAULT_OPTION_CAPS, "k": "max_k (50)"}
    lines = ["| option | kind | default | allowed | service cap |" + (" `small-model` |" if preset else ""),
             "|---|---|---|---|---|" + ("---|" if preset else "")]
    for item in describe_options(name):
        cap = _number(caps[item["name"]]) if "range" in item and item["name"] in caps else "–"
        kind = item["kind"] + (" or None" if item["optional"] else "")
        # the default as declared (LeapQuery's rerank="auto", not what "auto" found on this machine)
        row = f"| `{item['name']}` | {kind} | {_cell(declared[item['name']])} | {_range(item)} | {cap} |"
        if preset:
            row += f" {_cell(preset.options[item['name']]) if item['name'] in preset.options else ''} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


#: Methods whose docs page shows their options table (``options-NAME``).
OPTION_TABLES = ("direct", "cot", "genread", "retrieve-then-read", "self-ask", "react", "ircot", "iter-retgen",
                 "hgot", "gensco-max", "self-dc", "leapquery", "tor", "cor")

def _row(cells: list[str]) -> str:
    """A Markdown table row; an empty cell as ``| |``."""
    return "|" + "".join(f" {cell} |" if cell else " |" for cell in cells)


def _table(columns: list[str], rows: Iterable[list[str]]) -> str:
    """A Markdown table: the header, its rule, a row for each list of cells."""
    return "\n".join([_row(columns), "|" + "---|" * len(columns), *map(_row, rows)]) + "\n"


def retrieve_then_read_figures() -> str:
    """docs/methods/retrieve-then-read.md: Retrieve-then-Read's figures on the embedded Qwen, one
    row a benchmark, each from that benchmark's figures (the structured outputs, Tree of Reviews and
    LeapQuery benchmarks, the intervals runs, the presets), with the page it is on."""
    rtr = "retrieve-then-read"
    lines = ["| dataset, setting | n | model | figures | page |", "|---|---|---|---|---|"]

    def add(where: str, n: object, figures: str, page: str) -> None:
        lines.append(f"| {where} | {n} | Qwen2.5-1.5B | {figures} | {page} |")

    demo = next(r for r in demo_method_rows() if r["method"] == rtr)
    add("MuSiQue and HotpotQA dev, open (demo corpus)", "10 each",
        f"EM / F1: MuSiQue {demo['MuSiQue EM / F1']}, HotpotQA {demo['HotpotQA EM / F1']}, both {demo['both EM / F1']}; "
        f"{demo['s/q']} s/q", "[demo method](../benchmarks/demo-method.md)")
    for dataset, name in (("MuSiQue", "musique"), ("HotpotQA", "hotpotqa")):
        r = structured_outputs_row(name, rtr)
        add(f"{dataset} dev, distractor", r["n"], f"EM {r['EM']}, F1 {r['F1']}, sup. recall {r['sup. recall']}, {r['s/q']} s/q",
            "[structured outputs](../benchmarks/structured-outputs.md)")
    for dataset, name in (("2WikiMultihopQA", "2wikimultihopqa"), ("MuSiQue", "musique")):
        r = tree_of_reviews_row(name, rtr)
        add(f"{dataset} dev, distractor", r["n"], f"EM {r['EM']}, F1 {r['F1']}, Recall@15 {r['Recall@15']}, {r['s/q']} s/q",
            "[Tree of Reviews](../benchmarks/tree-of-reviews.md)")
    r = next(row for row in _figure_rows("leapquery-rerankers") if row["method"] == rtr)
    add("MuSiQue dev, open (MiniLM dense, `--support-k 5`)", r["n"],
        ", ".join(f"{name} {r[key]:.3f}" for name, key in zip(("Recall@5", "ROUGE-L", "BERTScore", "EM", "F1"),
                                                              LEAPQUERY_METRICS)) + f", {r['seconds_per_q']:.0f} s/q",
        "[LeapQuery](leapquery.md)")
    r = interval_cells()[rtr]
    add("MuSiQue dev, distractor", r["n"], f"EM {r['EM']}, F1 {r['F1']}, sup. recall {r['sup. recall']}",
        "[intervals](../benchmarks/intervals.md)")
    setting_names = {"distractor": "distractor", "open": "open (demo corpus)"}
    for table in json.loads(PRESETS.read_text(encoding="utf-8"))["tables"]:
        run = next(r for r in table["runs"] if r["label"] == rtr)
        add(f"{DATASET_NAMES[table['dataset']]} dev, {setting_names[table['setting']]}", run["n"],
            f"F1 {run['f1']:.3f}, {run['median_seconds']:.0f} s/q (median)", "[presets](../benchmarks/presets.md)")
    return "\n".join(lines) + "\n"


#: Table name -> its renderer (the Markdown between the markers).
TABLES: dict[str, Callable[[], str]] = {
    **{f"options-{name}": (lambda name=name: options_table(name)) for name in OPTION_TABLES},
    "intervals-summary": intervals_summary,
    "retrieve-then-read-figures": retrieve_then_read_figures,
    "intervals-comparisons": intervals_comparisons,
    "presets-musique": lambda: presets_table("musique"),
    "presets-hotpotqa": lambda: presets_table("hotpotqa"),
    "presets-2wikimultihopqa": lambda: presets_table("2wikimultihopqa"),
    "presets-against-defaults": presets_against_defaults,
    "presets-targets": presets_targets,
    "presets-second-target": presets_second_target,
    "demo-candidates": demo_candidates,
    "demo-method": demo_method_table,
    **{f"demo-method-{page}": (lambda methods=methods: demo_method_table(methods=methods))
       for page, methods in DEMO_METHOD_PAGES.items()},
    **{f"retrieval-{part}": (lambda part=part: retrieval_table(part)) for part in ("engines", "faiss", "indexes", "hnsw")},
    "retrieval-recall": lambda: retrieval_recall_table("recall"),
    **{f"foundation-{part}": (lambda part=part: foundation_table(part)) for part in ("bm25", "llm", "cache")},
    "retrieval-milvus": lambda: retrieval_recall_table("milvus"),
    "overhead": overhead_table,
    "overhead-history": overhead_history_table,
    "call-layers": call_layers_table,
    "decode-batch": decode_batch_table,
    "batched-samples": batched_samples_table,
    "eval-stream": eval_stream_table,
    "rerank": rerank_table,
    "loglikelihood": loglikelihood_table,
    "prefix-cache": prefix_cache_table,
    "prefix-share": prefix_share_table,
    "prefix-cache-memory": prefix_cache_memory_table,
    "leapquery-rerankers": leapquery_rerankers_table,
    **{f"tree-of-reviews-{dataset}": (lambda dataset=dataset: tree_of_reviews_table(dataset))
       for dataset in tree_of_reviews_datasets()},
    **{f"structured-outputs-{dataset}": (lambda dataset=dataset: structured_outputs_table(dataset))
       for dataset in structured_outputs_datasets()},
    **{f"structured-confidences-{dataset}": (lambda dataset=dataset: structured_confidences_table(dataset))
       for dataset in structured_outputs_datasets()},
    **{f"gensco-answer-{dataset}": (lambda dataset=dataset: gensco_answer_table(dataset=dataset))
       for dataset in gensco_answer_datasets()},
    **({f"structured-outputs-{page}": (lambda methods=methods: structured_outputs_page_table(methods))
        for page, methods in STRUCTURED_PAGES.items()} if structured_outputs_datasets() else {}),
    "calibrate-self-dc": calibration_table,
    "every-method": every_method_table,
    **{f"every-method-{page}": (lambda methods=methods: every_method_table(methods))
       for page, methods in EVERY_METHOD_PAGES.items()},
    **{name: (lambda name=name: before_after_table(name)) for name in before_after_names()},
}


def render(text: str) -> str:
    """``text`` with every marked table rendered anew (``KeyError`` for a table no renderer knows)."""
    return MARKED.sub(lambda m: m.group(1) + TABLES[m.group("name")]() + m.group(4), text)


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if MARKED.search(p.read_text(encoding="utf-8")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite the tables in the docs")
    ap.add_argument("--pictures", action="store_true", help="draw the report's plots the docs show")
    args = ap.parse_args()
    if args.pictures:
        with tempfile.TemporaryDirectory(prefix="hopqa-doc-plots-") as tmp:
            report_of(MUSIQUE30, "retrieve-then-read", ["f1"], plots_to=Path(tmp))
            target = DOCS / "benchmarks" / "intervals-differences.png"
            target.write_bytes((Path(tmp) / "differences.png").read_bytes())
            print(f"drew {target.relative_to(ROOT)}")
    stale = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = render(text)
        if new != text:
            stale.append(page)
            if args.write:
                page.write_text(new, encoding="utf-8")
    for page in stale:
        print(f"{'rewrote' if args.write else 'differs from its results'}: {page.relative_to(ROOT)}")
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
