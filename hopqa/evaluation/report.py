"""Comparison reports: methods x metrics with cost, as Markdown and HTML with plots.

``build_report(run_dirs, out_dir)`` finds every ``results.jsonl`` under the given directories,
recomputes each run's summary from its lines (so a half-finished run reports what it has),
and writes ``report.md`` and ``report.html`` (with matplotlib PNGs embedded: score vs cost per
method, and per-dataset bars) into ``out_dir``. With ``stratify=True`` each run is also split
by question length as in HGOT (Fang et al. 2024, Table 1): Long above the ``long_pct`` percentile of the
run's question lengths in words, Short below ``short_pct``, Medium between (defaults 98.5 and
1.5; HGOT used 98 and 2 for HotpotQA).
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hopqa.config import write_atomic
from hopqa.console import one_line
from hopqa.evaluation.runner import read_results, summarize

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


@dataclass
class Row:
    dataset: str
    split: str
    setting: str
    method: str
    stratum: str
    n: int
    failed: int
    metrics: dict[str, float]
    cost: dict[str, float]


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


def collect_rows(run_dirs: list[Path], stratify: bool = False, long_pct: float = 98.5,
                 short_pct: float = 1.5) -> list[Row]:
    rows: list[Row] = []
    for d in run_dirs:
        records = list(read_results(d / "results.jsonl").values())
        if not records:
            continue
        first = records[0]
        groups: dict[str, list[dict[str, Any]]] = {"all": records}
        if stratify:
            groups.update(_strata(records, long_pct, short_pct))
        for stratum, recs in groups.items():
            if not recs:
                continue
            s = summarize(recs, d)
            rows.append(Row(first.get("dataset", ""), first.get("split", ""), _setting(first.get("setting", ""), d),
                            first.get("method", d.name), stratum, s.n, s.failed, s.metrics, s.cost))
    return rows


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


def _cell(row: Row, col: tuple[str, str, str, str]) -> str:
    src = row.metrics if col[2] == "metrics" else row.cost
    return col[3].format(src[col[0]]) if col[0] in src else "–"


def _md(text: Any) -> str:
    """A Markdown table cell: one line, no terminal control characters, ``|`` escaped (the
    names come from results files, which anyone may have written)."""
    return one_line(text).replace("|", "\\|")


def markdown_table(rows: list[Row]) -> str:
    """The rows as a Markdown table (printed by ``hopqa eval`` and ``hopqa report``)."""
    cols = _present(rows)
    head = ["dataset", "setting", "method", "stratum", "n", "failed"] + [c[1] for c in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [_md(f"{r.dataset}/{r.split}"), _md(r.setting), _md(r.method), _md(r.stratum), str(r.n),
                 str(r.failed)]
        lines.append("| " + " | ".join(cells + [_cell(r, c) for c in cols]) + " |")
    if any("rouge_l" in r.metrics for r in rows) and not any("bertscore" in r.metrics for r in rows):
        lines += ["", BERTSCORE_NOTE]
    return "\n".join(lines)


def _save(fig: Any, path: Path) -> Path:
    """Write a matplotlib figure as PNG atomically (a reader never sees half an image) and close it."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buffer.getvalue())
    return path


def _plots(rows: list[Row], out_dir: Path) -> list[Path]:
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
        ax.scatter(tokens, r.metrics.get("f1", 0.0), s=40)
        ax.annotate(f"{r.method} ({r.dataset})", (tokens, r.metrics.get("f1", 0.0)), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("tokens per question")
    ax.set_ylabel("F1")
    ax.set_title("score vs cost")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(_save(fig, out_dir / "score_vs_cost.png"))
    for dataset in sorted({r.dataset for r in main}):
        sub = [r for r in main if r.dataset == dataset]
        fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(sub) + 2), 3.5))
        labels = [f"{r.method}\n{r.setting}" for r in sub]
        xs = range(len(sub))
        ax.bar([x - 0.2 for x in xs], [r.metrics.get("em", 0) for r in sub], width=0.4, label="EM")
        ax.bar([x + 0.2 for x in xs], [r.metrics.get("f1", 0) for r in sub], width=0.4, label="F1")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_title(dataset)
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(_save(fig, out_dir / f"bars_{dataset}.png"))
    return paths


def html_report(rows: list[Row], images: list[Path]) -> str:
    cols = _present(rows)
    head = ["dataset", "setting", "method", "stratum", "n", "failed"] + [c[1] for c in cols]
    body = []
    for r in rows:
        cells = [f"{r.dataset}/{r.split}", r.setting, r.method, r.stratum, str(r.n), str(r.failed)]
        cells += [_cell(r, c) for c in cols]
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    imgs = "".join(
        f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}"/></figure>' for p in images)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>hopqa report</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:nth-child(-n+4){text-align:left}"
        "th{background:#f0f0f0}figure{display:inline-block;margin:1em}</style></head><body>"
        "<h1>hopqa evaluation report</h1><table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head)
        + "</tr>" + "".join(body) + "</table>" + imgs + "</body></html>"
    )


def build_report(run_paths: list[str | Path], out_dir: str | Path, stratify: bool = False,
                 long_pct: float = 98.5, short_pct: float = 1.5, plots: bool = True) -> tuple[str, Path]:
    """Write report.md and report.html (and PNG plots) into out_dir; return the Markdown table."""
    runs = find_runs(run_paths)
    if not runs:
        raise FileNotFoundError(f"no results.jsonl under {', '.join(map(str, run_paths))}")
    rows = collect_rows(runs, stratify, long_pct, short_pct)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = markdown_table(rows)
    write_atomic(out / "report.md", "# hopqa evaluation report\n\n" + table + "\n")
    images = _plots(rows, out) if plots else []
    write_atomic(out / "report.html", html_report(rows, images))
    write_atomic(out / "report.json", json.dumps([r.__dict__ for r in rows], indent=1))
    return table, out
