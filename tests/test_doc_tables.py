"""The docs' measured tables are rendered from results (``benchmarks/doc_tables.py``): each
marked table equals what its renderer makes of the stored runs, so a table that no longer
matches them fails here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

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


def test_recall_table_bolds_every_best_of_a_dataset(tmp_path, monkeypatch):
    import json

    tables = _doc_tables()
    rows = [{"dataset": "musique", "retriever": "a", "r5": 0.5, "r10": 0.7, "r20": 0.8, "p50_ms": 0.5, "p95_ms": 120.4},
            {"dataset": "musique", "retriever": "b", "r5": 0.6, "r10": 0.7, "r20": 0.7999, "p50_ms": 12.0, "p95_ms": 20.0},
            {"dataset": "hotpotqa", "retriever": "a", "r5": 0.1, "r10": 0.2, "r20": 0.3, "p50_ms": 1.0, "p95_ms": 2.0}]
    (tmp_path / "r.json").write_text(json.dumps({"about": {}, "rows": {"recall": rows}}))
    monkeypatch.setattr(tables, "RETRIEVAL", tmp_path / "r.json")
    assert tables.retrieval_recall_table("recall").splitlines()[2:] == [
        "| MuSiQue | a | 0.500 | **0.700** | **0.800** | 0.5 | 120 |",  # 0.7999 ties 0.800 to three decimals
        "| MuSiQue | b | **0.600** | **0.700** | **0.800** | 12.0 | 20.0 |",
        "| HotpotQA | a | **0.100** | **0.200** | **0.300** | 1.0 | 2.0 |"]


def test_demo_candidates_pairs_each_run_with_the_demo_method_by_id(tmp_path, monkeypatch):
    import json

    tables = _doc_tables()
    ircot = {f"q{i}": 0.0 for i in range(10)}
    better = {**ircot, "q0": 1.0, "q1": 1.0, "q2": 0.5}
    runs = [{"label": "ircot", "f1": 0.0, "median_seconds": 40.0, "f1_by_id": ircot},
            {"label": "leapquery (small-model)", "f1": 0.25, "median_seconds": None, "f1_by_id": better},
            {"label": "hgot (small-model)", "f1": 0.1, "median_seconds": 190.0,
             "f1_by_id": {"q0": 1.0, "q1": 0.0, "q2": 0.0, "q3": 0.0, "q4": 0.0}},
            {"label": "self-dc (defaults)", "f1": 0.05, "median_seconds": 12.0}]
    (tmp_path / "p.json").write_text(json.dumps({"about": {}, "tables": [
        {"dataset": "musique", "setting": "open", "runs": runs}]}))
    monkeypatch.setattr(tables, "PRESETS", tmp_path / "p.json")
    lines = tables.demo_candidates().splitlines()[2:]
    assert lines[0].startswith("| leapquery, `small-model` | 0.250 | – | +0.250 [")
    assert lines[0].endswith(", 3 / 7 / 0 |")
    assert lines[1].startswith("| hgot, `small-model` | 0.100 | 190 | +0.200 [") and lines[1].endswith(
        ", 1 / 4 / 0 (5 questions) |")
    assert lines[2] == "| self-dc, defaults (`verb`) | 0.050 | 12 | – (its records are gone) |"
    assert lines[3] == "| ircot (JSON) | 0.000 | 40 | (the demo's method) |"


def test_presets_table_says_how_many_questions_a_shorter_run_answered(tmp_path, monkeypatch):
    import json

    tables = _doc_tables()
    runs = [{"label": "retrieve-then-read", "n": 30, "asked": 30, "partial": False, "f1": 0.5, "median_seconds": 18.0},
            {"label": "tor (defaults)", "n": 10, "asked": 10, "partial": False, "f1": 0.2, "median_seconds": 82.4},
            {"label": "ircot", "n": 12, "asked": 30, "partial": True, "f1": 0.6, "median_seconds": None}]
    against = [{"method": "tor (defaults)", "n": 10, "diff": -0.4, "low": -0.68, "high": -0.16, "p_value": 0.031,
                "wins": 0, "ties": 4, "losses": 6, "significant": True}]
    (tmp_path / "p.json").write_text(json.dumps({"about": {}, "tables": [
        {"dataset": "hotpotqa", "setting": "distractor", "runs": runs, "vs_retrieve_then_read": against}]}))
    monkeypatch.setattr(tables, "PRESETS", tmp_path / "p.json")
    assert tables.presets_table("hotpotqa").splitlines()[2:] == [
        "| retrieve-then-read | 0.500 | 18 | – |",
        "| tor, defaults, first 10 | 0.200 | 82 | **−0.400 [−0.680, −0.160]**, p = 0.031, 0 / 4 / 6 |",
        "| ircot (JSON), partial (12 of 30) | 0.600 | – | – |"]
    # measured in a second setting: a setting column, each table's rows under its own setting
    (tmp_path / "p.json").write_text(json.dumps({"about": {}, "tables": [
        {"dataset": "hotpotqa", "setting": "distractor", "runs": runs[:1], "vs_retrieve_then_read": []},
        {"dataset": "hotpotqa", "setting": "open", "runs": runs[:1], "vs_retrieve_then_read": []}]}))
    lines = tables.presets_table("hotpotqa").splitlines()
    assert lines[0].startswith("| setting | method |")
    assert lines[2:] == ["| distractor | retrieve-then-read | 0.500 | 18 | – |", "| open | retrieve-then-read | 0.500 | 18 | – |"]


def test_the_targets_tables_count_the_datasets_a_preset_is_above_its_defaults_on_30_questions(tmp_path, monkeypatch):
    import json

    tables = _doc_tables()

    def c(method, n, diff, low, high, p=0.5):
        return {"method": method, "n": n, "diff": diff, "low": low, "high": high, "p_value": p,
                "wins": 3, "ties": n - 4, "losses": 1}

    figures = {"about": {}, "tables": [
        {"dataset": "musique", "setting": "open", "runs": [],
         "preset_vs_defaults": [c("tor", 30, 0.2, 0.05, 0.35, p=0.01), c("tor (reader=short)", 30, 0.5, 0.4, 0.6)],
         "vs_retrieve_then_read": [c("tor (small-model)", 30, 0.1, 0.02, 0.2, p=0.06)]},
        {"dataset": "hotpotqa", "setting": "open", "runs": [], "vs_retrieve_then_read": [],
         "preset_vs_defaults": [c("tor", 30, -0.1, -0.3, 0.1)]},
        {"dataset": "2wikimultihopqa", "setting": "open", "runs": [], "vs_retrieve_then_read": [],
         "preset_vs_defaults": [c("tor", 10, 0.1, 0.0, 0.3)]}]}
    (tmp_path / "p.json").write_text(json.dumps(figures))
    monkeypatch.setattr(tables, "PRESETS", tmp_path / "p.json")
    rows = {tuple(line.split(" | ")[:2]): line for line in tables.presets_targets().splitlines()[2:]}
    assert rows[("| tor", "open")] == ("| tor | open | **+0.200 [+0.050, +0.350]** | −0.100 [−0.300, +0.100] "
                                       "| +0.100 [+0.000, +0.300] (10 q) | 1 of 3 (+1 on fewer) |")
    assert rows[("| tor", "distractor")] == "| tor | distractor | – | – | – | 0 of 3 |"
    second = {line.split(" | ")[0]: line for line in tables.presets_second_target().splitlines()[2:]}
    assert second["| tor"] == "| tor | 30 | +0.100 [+0.020, +0.200] | yes | 0.060 | 3 / 26 / 1 |"
    assert second["| hgot"] == "| hgot | – | | | | |"


def test_the_embedded_models_batching_tables_compute_their_ratios_from_the_rows():
    """``decode_batch_table`` and ``batched_samples_table`` render what their scripts stored: per
    token and tokens a second from the milliseconds of a step, each speed-up from both sides."""
    tables = _doc_tables()
    assert tables.decode_batch_table([{"sequences": 1, "ms_step": 40.0}, {"sequences": 2, "ms_step": 60.0}]) == (
        "| sequences | ms / step | ms / token | tokens / s | against 1 sequence |\n"
        "|---|---|---|---|---|\n"
        "| 1 | 40.0 | 40.0 | 25.0 | 1.00× |\n"
        "| 2 | 60.0 | 30.0 | 33.3 | 1.33× |\n")
    row = {"n": 2, "requests": 6, "batched_s": 12.4, "alone_s": 11.3, "batched_evaluated": 1234,
           "alone_evaluated": 2468, "samples": 12, "identical": 2, "same_first_token": 12}
    assert tables.batched_samples_table([row]).splitlines()[2] == "| 2 | 6 | 12.4 | 11.3 | 0.91× | 1,234 / 2,468 | 2 / 12 | 12 / 12 |"


def test_the_prefix_cache_memory_table_starts_from_the_loaded_model():
    """``prefix_cache_memory_table`` renders what ``prefix_cache_memory.py --figures`` wrote: the
    model loaded with nothing cached first, then each printed row."""
    tables = _doc_tables()
    row = {"prompts": 8, "tokens_sent": 13012, "entries": 8, "cache_mb": 349.6, "evictions": 0, "rss_mb": 2238.2,
           "rss_over_loaded_mb": 378.1, "peak_rss_mb": 2300.4, "seconds": 215.3}
    lines = tables.prefix_cache_memory_table({"about": {"loaded_rss_mb": 1860.1}, "rows": [row]}).splitlines()
    assert lines[2:] == ["| 0 (loaded) | 0 | 0 | 0 | 0 | 1,860 | | | |",
                         "| 8 | 13,012 | 8 | 350 | 0 | 2,238 | +378 | 2,300 | 215 |"]


def test_the_demo_method_table_pools_each_candidate_over_its_datasets():
    """``demo_method_table`` renders ``demo_choice.py --figures``: a row a candidate in the order
    measured, EM / F1 per dataset, then over both with the questions pooled (weighted by n), the
    candidate's options and LLM query in its name, "–" for a dataset it has not run; a method
    page's rows under the same columns."""
    tables = _doc_tables()

    def row(label, method, dataset, n, em, f1, calls, secs, failed=0, options=(), llm="embedded:qwen2.5-1.5b"):
        return {"label": label, "method": method, "options": list(options), "llm": llm, "dataset": dataset, "n": n,
                "failed": failed, "metrics": {"em": em, "f1": f1},
                "cost": {"llm_calls_per_q": calls, "seconds_per_q": secs}, "f1_by_id": {}}

    rows = [row("rtr", "retrieve-then-read", "musique", 10, 0.0, 0.1, 1.0, 10.0),
            row("rtr", "retrieve-then-read", "hotpotqa", 30, 0.4, 0.5, 1.0, 20.0, failed=1),
            row("self-dc (prob)", "self-dc", "musique", 10, 0.1, 0.2, 8.0, 40.0, options=["confidence=prob"],
                llm="embedded:qwen2.5-1.5b?logits_all=1")]
    lines = tables.demo_method_table(rows).splitlines()
    assert lines[0] == "| method | MuSiQue EM / F1 | HotpotQA EM / F1 | both EM / F1 | LLM calls/q | s/q | failed |"
    assert lines[2:] == ["| retrieve-then-read | 0.00 / 0.10 | 0.40 / 0.50 | 0.30 / 0.40 | 1.0 | 18 | 1 |",
                         "| self-dc (`confidence=prob`, `?logits_all=1`) | 0.10 / 0.20 | – | 0.10 / 0.20 | 8.0 | 40 "
                         "| 0 |"]
    assert tables.demo_method_table(rows, methods=("self-dc",)).splitlines()[0] == lines[0]
    assert tables.demo_method_table(rows, methods=("self-dc",)).splitlines()[2:] == lines[3:]


def test_the_structured_outputs_table_shows_each_method_and_mode_of_its_dataset():
    """``structured_outputs_table`` renders ``structured_outputs.py --figures``: the dataset's rows
    only, "–" for Retrieve-then-Read's mode and rates (no structured step), rates as percentages."""
    tables = _doc_tables()

    def row(method, structured, dataset="musique", **metrics):
        return {"dataset": dataset, "method": method, "structured": structured, "n": 10, "failed": 0,
                "metrics": {"em": 0.1, "f1": 0.125, "support_recall": 0.6, **metrics},
                "cost": {"llm_calls_per_q": 3.0, "seconds_per_q": 41.4}, "f1_by_id": {}, "rtr_f1_same": 0.13,
                "rtr_n_same": 10}

    rows = [row("retrieve-then-read", None), row("ircot", "auto", parse_rate=0.895, parse_fallback_rate=0.105),
            row("ircot", "off", dataset="hotpotqa", parse_rate=1.0, parse_fallback_rate=0.0)]
    assert tables.structured_outputs_table("musique", rows).splitlines()[2:] == [
        "| retrieve-then-read | – | 10 | 0.10 | 0.12 | 0.60 | – | – | 3.0 | 41 | 0.13 (10) |",
        "| ircot | auto | 10 | 0.10 | 0.12 | 0.60 | 89.5% | 10.5% | 3.0 | 41 | 0.13 (10) |"]


def test_the_structured_outputs_tables_come_a_file_a_dataset(tmp_path, monkeypatch):
    """``structured-outputs-DATASET`` is registered for each ``structured-outputs-DATASET.json``
    (each dataset is a run of hours, written by its own ``--figures``), in the pages' order, MuSiQue
    first; a row is found by method and mode, and a file without rows of its dataset is an error,
    not an empty table."""
    tables = _doc_tables()
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(tables, "DOCS", tmp_path)
    assert tables.structured_outputs_datasets() == []

    def row(method, structured, f1):
        return {"dataset": "musique", "method": method, "structured": structured, "n": 10, "failed": 0,
                "metrics": {"em": 0.0, "f1": f1, "support_recall": 0.5}, "cost": {"llm_calls_per_q": 3.0,
                "seconds_per_q": 40.0}, "f1_by_id": {}, "rtr_f1_same": 0.2, "rtr_n_same": 10}

    rows = [row("retrieve-then-read", None, 0.2), row("ircot", "auto", 0.3), row("ircot", "off", 0.4)]
    (tmp_path / "results" / "structured-outputs-musique.json").write_text(json.dumps({"about": {}, "rows": rows}))
    (tmp_path / "results" / "structured-outputs-hotpotqa.json").write_text(json.dumps({"about": {}, "rows": rows}))
    (tmp_path / "results" / "structured-outputs-bamboogle.json").write_text(json.dumps({"about": {}, "rows": rows}))
    assert tables.structured_outputs_datasets() == ["musique", "hotpotqa", "bamboogle"]  # the pages' order
    assert len(tables.structured_outputs_table("musique").splitlines()) == 5
    assert tables.structured_outputs_row("musique", "ircot", "off")["F1"] == "0.40"
    assert tables.structured_outputs_row("musique", "retrieve-then-read")["structured"] == "–"
    with pytest.raises(KeyError, match="no hotpotqa rows"):
        tables.structured_outputs_table("hotpotqa")
    histograms = [{"dataset": "musique", "method": "self-dc", "structured": "auto", "bins": [0, 1, 3, 3, 4, 8, 3, 2, 1, 0]},
                  {"dataset": "hotpotqa", "method": "self-dc", "structured": "off", "bins": [1] * 10}]
    assert tables.structured_confidences_table("musique", histograms).splitlines()[2:] == [
        "| self-dc | auto | 25 | 0 | 1 | 3 | 3 | 4 | 8 | 3 | 2 | 1 | 0 |"]
    with pytest.raises(KeyError, match="no musique confidence histograms"):
        tables.structured_confidences_table("musique")
    page = tables.structured_outputs_page_table(("retrieve-then-read", "ircot"),
                                                {"musique": rows, "hotpotqa": [{**r, "dataset": "hotpotqa"} for r in rows]})
    assert [line.split(" | ")[:3] for line in page.splitlines()[2:]] == [
        ["| MuSiQue", "retrieve-then-read", "–"], ["| MuSiQue", "ircot", "auto"], ["| MuSiQue", "ircot", "off"],
        ["| HotpotQA", "retrieve-then-read", "–"], ["| HotpotQA", "ircot", "auto"], ["| HotpotQA", "ircot", "off"]]


def test_a_before_after_table_names_the_commit_of_each_run():
    """``before_after_table``: the rows of the run before the change, then after, each with the
    commit that ran it and its date; a metric the older version did not compute is "–"."""
    tables = _doc_tables()

    def figures(commit, date, **metrics):
        m = {"em": 0.0, "f1": 0.059, "precision": 0.04, "recall": 0.14, "support_recall": 0.7,
             "support_precision": 0.2, "k_precision": 0.76, **metrics}
        cost = {"llm_calls_per_q": 34.9, "prompt_tokens_per_q": 47917.7, "retrieval_calls_per_q": 6.0,
                "seconds_per_q": 87.94}
        return {"about": {"hopqa": commit, "date": date}, "rows": [{"method": "hgot", "metrics": m, "cost": cost}]}

    lines = tables.before_after_table("x", {"before": figures("abc1234", "2026-12-07"),
                                            "after": figures("def5678", "2026-12-08", support_f1=0.25)}).splitlines()
    assert lines[2:] == [
        "| hgot, before | `abc1234` | 2026-12-07 | 0.000 | 0.059 | 0.04 / 0.14 | 0.70 / 0.20 / – | 0.76 | 34.9 | 1,373 | 6.0 "
        "| 87.9 |",
        "| hgot, after | `def5678` | 2026-12-08 | 0.000 | 0.059 | 0.04 / 0.14 | 0.70 / 0.20 / 0.25 | 0.76 | 34.9 | 1,373 | 6.0 "
        "| 87.9 |"]


def test_the_overhead_history_gives_each_harness_its_range_over_the_runs(tmp_path, monkeypatch):
    """``overhead-history``: a row per harness in the order of the runs, each figure's range over
    the runs (one value where they agree to its precision), no cache column for a harness without."""
    tables = _doc_tables()
    (tmp_path / "results").mkdir()

    def row(harness, workers, overhead, speedup, cached, wall=10.0):
        return {"harness": harness, "method": "retrieve-then-read", "workers": workers, "calls": 64, "wall": wall,
                "start": 1.0, "end": 0.1, "overhead_ms": overhead if workers == 1 else None, "speedup": speedup,
                "speedup_after_start": speedup, "cached_wall": cached}

    for i, (overhead, cached) in enumerate([(11.04, 0.5), (12.5, 0.7)]):
        rows = [row("hopqa before (abc1234)", 1, overhead, 1.0, cached), row("hopqa before (abc1234)", 8, None, 6.5, cached),
                row("sdk", 1, 5.0, 1.0, None), row("sdk", 8, None, 7.0 + i / 1000, None)]
        (tmp_path / "results" / f"overhead-history-{i + 1}.json").write_text(json.dumps({"about": {}, "rows": rows}))
    (tmp_path / "results" / "overhead-1-x.json").write_text("not read by this table")
    monkeypatch.setattr(tables, "DOCS", tmp_path)
    assert tables.overhead_history_table().splitlines()[2:] == [
        "| hopqa before (abc1234) | 2 | 11.0–12.5 ms | 6.50× | 1.00 s | 0.10 s | 0.50–0.70 s (5.0–7.0 %) |",
        "| sdk | 2 | 5.0 ms | 7.00× | 1.00 s | 0.10 s | – (no cache) |"]


def test_the_eval_stream_table_says_whether_ctrl_c_ended_the_run():
    tables = _doc_tables()
    killed = {"label": "before (x)", "first_s": 134.9, "peak_mb": 3384.2, "exit_s": None, "exit_timeout": 60.0,
              "returncode": -9, "warning_lines": 1000000, "requests_after": 4075}
    now = {**killed, "label": "now", "first_s": 3.04, "peak_mb": 245.0, "exit_s": 0.21, "returncode": 130,
           "warning_lines": 21, "requests_after": 0}
    assert tables.eval_stream_table([killed, now]).splitlines()[2:] == [
        "| before (x) | 134.9 s | 3,384 MB | still running after 60 s (killed) | 1,000,000 | 4,075 |",
        "| now | 3.0 s | 245 MB | exit 130 after 0.2 s | 21 | 0 |"]


def test_the_rerank_table_shows_each_prompt_version_and_the_ties():
    """``rerank_table`` renders one row per stored reranker row, file after file, with the LLM
    judge's reply form cut to its JSON and no form for rerankers without one."""
    tables = _doc_tables()
    base = {"dataset": "musique", "questions": 15, "recall": 0.5667, "changed": 0, "tied": 0.0, "distinct": 9.9,
            "most_given": [], "seconds": 0.0}
    judge = {**base, "reranker": "llm", "recall": 0.6, "changed": 3, "tied": 0.8, "distinct": 1.53,
             "most_given": [[7.0, 140], [8.0, 9]], "seconds": 12.34,
             "form": 'Reply with one JSON object of this form: {"score": 7}'}
    assert tables.rerank_table([[{**base, "reranker": "none"}], [judge]]).splitlines()[2:] == [
        "| musique | none (BM25's order) | – | 15 | 0.567 | 0 of 15 | 0% | 9.9 | – | 0.0 |",
        '| musique | llm | `{"score": 7}` | 15 | 0.600 | 3 of 15 | 80% | 1.5 | 7 ×140, 8 ×9 | 12.3 |']


def test_the_intervals_summary_notes_a_figure_over_fewer_questions():
    """The 30-question summary: the figures and intervals of ``hopqa report``, ``(on N)`` where
    a figure is over fewer questions than the run (Self-DC's 7 questions without passages)."""
    tables = _doc_tables()
    lines = tables.intervals_summary().splitlines()
    self_dc = next(line for line in lines if line.startswith("| self-dc"))
    assert "| 0.457 ±0.144 (on 23) |" in self_dc and self_dc.endswith("| – (paused for measurements) |")
    assert "(on " not in next(line for line in lines if line.startswith("| ircot (JSON)"))


def test_a_method_page_row_names_its_options(tmp_path, monkeypatch):
    """The same method measured twice (Self-DC's verbal and `prob` confidence): its page's rows
    say which options each ran with, as the every-method page does."""
    tables = _doc_tables()
    (tmp_path / "results").mkdir()
    about = {"date": "2026-11-30", "llm": "embedded:smollm2-135m", "dataset": "musique", "split": "dev",
             "setting": "distractor"}
    cost = {"llm_calls_per_q": 3.0, "prompt_tokens_per_q": 500, "completion_tokens_per_q": 100,
            "retrieval_calls_per_q": 0.5, "seconds_per_q": 5.0}
    for i, options in enumerate([[], ["confidence=prob"]]):
        row = {"method": "self-dc", "options": options, "n": 20, "failed": 0, "metrics": {"em": 0.0, "f1": 0.1 * i},
               "cost": cost}
        (tmp_path / "results" / f"every-method-{i}.json").write_text(json.dumps({"about": about, "rows": [row]}))
    monkeypatch.setattr(tables, "DOCS", tmp_path)
    page = tables.every_method_table(("self-dc",)).splitlines()
    assert page[2].startswith("| MuSiQue dev, distractor | 20 | 2026-11-30, smollm2-135m | 0.000 | 0.000 |")
    assert page[3].startswith("| MuSiQue dev, distractor (`confidence=prob`) | 20 |")
    assert tables.every_method_table().splitlines()[3].startswith("| self-dc (`confidence=prob`) | 2026-11-30")


def test_the_tree_of_reviews_tables_come_from_the_scripts_rows_a_table_a_dataset(tmp_path, monkeypatch):
    """``tree-of-reviews-DATASET`` renders ``benchmarks/tree_of_reviews.py --figures`` rows of that
    dataset ("–" for a figure a method has not), for its page and for Retrieve-then-Read's
    figures; a dataset the file has no rows of has no table."""
    tables = _doc_tables()
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(tables, "DOCS", tmp_path)
    assert tables.tree_of_reviews_datasets() == []
    rtr = {"dataset": "musique", "method": "retrieve-then-read", "n": 10, "failed": 0,
           "metrics": {"em": 0.1, "f1": 0.1333, "support_recall": 0.6},
           "cost": {"llm_calls_per_q": 1.0, "seconds_per_q": 9.6}}
    tor = {"dataset": "musique", "method": "tor", "n": 10, "failed": 0,
           "metrics": {"em": 0.2, "f1": 0.25, "support_recall": 0.65, "docs_reviewed": 5.5, "docs_per_call": 0.775,
                       "evidence": 4.9, "parse_rate": 1.0, "parse_fallback_rate": 0.0},
           "cost": {"llm_calls_per_q": 7.1, "seconds_per_q": 41.4}}
    (tmp_path / "results" / "tree-of-reviews.json").write_text(json.dumps({"about": {}, "rows": [rtr, tor]}))
    assert tables.tree_of_reviews_datasets() == ["musique"]
    assert tables.tree_of_reviews_table("musique").splitlines()[2:] == [
        "| retrieve-then-read | 10 | 0.10 | 0.13 | 0.60 | 1.0 | – | – | – | – | – | 10 |",
        "| tor | 10 | 0.20 | 0.25 | 0.65 | 7.1 | 5.5 | 77.5% | 4.9 | 100.0% | 0.0% | 41 |"]
    assert tables.tree_of_reviews_row("musique", "tor")["F1"] == "0.25"
    with pytest.raises(KeyError, match="no 2wikimultihopqa rows"):
        tables.tree_of_reviews_row("2wikimultihopqa", "retrieve-then-read")


def test_every_results_file_says_when_where_and_how_it_was_measured():
    """Each figures file under docs/results/ records the date, the machine and the command that
    measured it (and the model, where a model ran: ``llm`` or ``model``), so every rendered
    table can say so; the one file of transcribed differences dates each of its entries."""
    import json

    tables = _doc_tables()
    files = sorted((tables.DOCS / "results").glob("*.json"))
    assert len(files) > 20
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        if path.name == "transcribed-comparisons.json":
            assert all(entry.get("date") for entry in data["comparisons"] + data["f1"]), path.name
            continue
        about = data["about"]
        assert all(about.get(key) for key in ("date", "machine", "command")), path.name
        rows = json.dumps(data)
        if '"llm_calls' in rows or '"f1"' in rows:  # a model answered questions
            assert about.get("llm") or about.get("model"), path.name
