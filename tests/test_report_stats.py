"""Intervals, paired comparisons, breakdowns and partial runs in ``hopqa report`` (issue 32):
exact values on hand-made runs, checked against reference computations."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hopqa.build import build_method
from hopqa.evaluation import stats
from hopqa.evaluation.report import (
    build_report,
    collect_rows,
    compare_by_id,
    compare_rows,
    field_value,
    markdown_table,
)
from hopqa.evaluation.runner import evaluate, read_asked, summarize
from hopqa.llm.scripted import ScriptedLLM
from hopqa.types import Example


# -- the statistics ------------------------------------------------------------------------------------
def _reference_percentile_interval(values: list[float], resamples: int, seed: int) -> tuple[float, float]:
    """The percentile bootstrap written out plainly: resample, mean, percentiles."""
    rng = np.random.default_rng(seed)
    x = np.asarray(values, dtype=float)
    means = [x[rng.integers(0, len(x), size=len(x))].mean() for _ in range(resamples)]
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def test_interval_of_a_mean_matches_a_reference_computation():
    values = [0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.0, 1.0, 0.75, 0.4, 0.9, 0.1]
    found = stats.interval(values)
    assert found.value == pytest.approx(np.mean(values))
    # the same draws as a resample matrix drawn at once (one chunk for 12 questions)
    rng = np.random.default_rng(stats.SEED)
    idx = rng.integers(0, len(values), size=(stats.RESAMPLES, len(values)))
    means = np.asarray(values)[idx].mean(axis=1)
    assert (found.low, found.high) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    # and an independent computation: the plain loop, and scipy's percentile bootstrap, other draws
    low, high = _reference_percentile_interval(values, 4000, seed=7)
    assert found.low == pytest.approx(low, abs=0.03) and found.high == pytest.approx(high, abs=0.03)
    from scipy.stats import bootstrap

    ref = bootstrap((np.asarray(values),), np.mean, n_resamples=4000, method="percentile", random_state=3)
    assert found.low == pytest.approx(ref.confidence_interval.low, abs=0.03)
    assert found.high == pytest.approx(ref.confidence_interval.high, abs=0.03)
    assert found.low < found.value < found.high


def test_interval_edge_cases_and_ratios():
    assert all(math.isnan(x) for x in (stats.interval([]).value, stats.interval([]).low))
    one = stats.interval([0.4])
    assert one.value == 0.4 and math.isnan(one.low) and math.isnan(one.high)
    constant = stats.interval([0.5] * 20)
    assert (constant.value, constant.low, constant.high) == (0.5, 0.5, 0.5)
    # a pooled rate: 3 of 4 outputs parsed on one question, 0 of 0 on another, 1 of 4 on a third
    rate = stats.interval([3, 0, 1], [4, 0, 4])
    assert rate.value == 0.5 and 0.25 <= rate.low <= rate.value <= rate.high <= 0.75
    assert math.isnan(stats.interval([0, 0], [0, 0]).value)
    with pytest.raises(ValueError, match="differ in length"):
        stats.interval([1, 2], [1])
    # several figures drawn from the same resamples give what each gives alone
    both = stats.intervals({"a": ([1, 0, 1, 1], None), "b": ([2, 3, 1, 0], [1, 1, 1, 1])})
    assert both["a"] == stats.interval([1, 0, 1, 1]) and both["b"] == stats.interval([2, 3, 1, 0])


def test_a_method_winning_7_of_10():
    a = [1.0] * 7 + [0.0] * 3
    b = [0.0] * 10
    result = stats.compare(a, b)
    assert (result.n, result.wins, result.ties, result.losses) == (10, 7, 3, 0)
    assert result.diff == pytest.approx(0.7)
    rng = np.random.default_rng(stats.SEED)
    d = np.asarray(a) - np.asarray(b)
    means = d[rng.integers(0, 10, size=(stats.RESAMPLES, 10))].mean(axis=1)
    assert (result.low, result.high) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    assert result.low > 0 and result.significant
    # exact sign-flip test: 7 equal non-zero differences, only the two all-same-sign patterns
    # of 2^7 are as extreme as the observed one
    assert result.p_value == pytest.approx(2 / 2**7)
    # sd of the differences (0.483) needs (1.96 * 0.483 / 0.05)^2 questions
    sd = np.std(d, ddof=1)
    assert result.needed == math.ceil((1.959963984540054 * sd / 0.05) ** 2)


def test_identical_pair_has_p_one_and_a_dominating_one_is_significant_at_30():
    same = [0.1 * (i % 7) for i in range(30)]
    tie = stats.compare(same, same)
    assert tie.p_value == 1.0 and (tie.low, tie.high) == (0.0, 0.0) and not tie.significant
    assert (tie.wins, tie.ties, tie.losses) == (0, 30, 0) and tie.needed is None
    better = [v + 0.05 + 0.01 * (i % 3) for i, v in enumerate(same)]
    dominated = stats.compare(better, same)
    assert dominated.p_value < 0.05 and dominated.significant and dominated.wins == 30
    # above EXACT_MAX non-zero differences the test draws sign patterns: p = (extreme + 1) / (draws + 1)
    assert dominated.p_value == pytest.approx(1 / (stats.PERMUTATIONS + 1))
    assert stats.compare(same, better).p_value == dominated.p_value  # two-sided


def test_few_differing_questions_exclude_zero_from_the_interval_but_are_not_marked():
    # 4 wins and 26 ties: a resample misses all 4 wins with probability (26/30)^30 = 1.4 % < 2.5 %,
    # so the percentile interval excludes 0, while the exact permutation test gives 2 / 2^4
    few = stats.compare([1.0] * 4 + [0.0] * 26, [0.0] * 30)
    assert few.excludes_zero and few.p_value == pytest.approx(0.125) and not few.significant
    from hopqa.evaluation.report import _verdict

    assert _verdict(few) == "yes, but p ≥ 0.05"
    assert _verdict(stats.compare([1.0] * 7 + [0.0] * 3, [0.0] * 10), bold=True) == "**yes**"
    assert _verdict(stats.compare([0.5] * 5, [0.5] * 5)) == "no"


def test_permutation_p_is_exact_for_small_n_and_matches_enumeration():
    d = [0.5, -0.25, 0.75, 0.1, 0.0, -0.2]
    nonzero = [x for x in d if x]
    sums = [abs(sum(s * x for s, x in zip(signs, nonzero)))
            for signs in np.array(np.meshgrid(*[[-1, 1]] * len(nonzero))).T.reshape(-1, len(nonzero))]
    expected = np.mean([s >= abs(sum(nonzero)) - 1e-12 for s in sums])
    assert stats.permutation_p(d) == pytest.approx(expected)


def test_comparison_needs_equal_lengths():
    with pytest.raises(ValueError, match="same questions"):
        stats.compare([1, 2], [1])
    assert stats.compare([], []).n == 0


def test_statistics_and_metrics_import_no_plotting():
    code = ("import sys, hopqa.evaluation.stats, hopqa.evaluation.metrics; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- runs made by hand -----------------------------------------------------------------------------------
def _run(root: Path, method: str, f1: dict[str, float], asked: int | None = None, dataset: str = "musique",
         fields: dict[str, dict] | None = None, failed: tuple[str, ...] = ()) -> Path:
    run = root / method
    run.mkdir(parents=True)
    lines = []
    for qid, value in f1.items():
        rec = {"id": qid, "dataset": dataset, "split": "dev", "setting": "distractor", "method": method,
               "question": f"question {qid}", "status": "failed" if qid in failed else "ok",
               "metrics": {} if qid in failed else {"em": float(value == 1.0), "f1": value},
               "usage": {"llm_calls": 2, "prompt_tokens": 100, "completion_tokens": 10, "seconds": 1.5},
               "fields": (fields or {}).get(qid, {})}
        lines.append(json.dumps(rec) + "\n")
    (run / "results.jsonl").write_text("".join(lines))
    if asked is not None:
        (run / "questions.json").write_text(json.dumps({"asked": asked}))
    return run


MUSIQUE_IDS = ["2hop__1_2", "2hop__3_4", "3hop1__5_6_7", "3hop2__8_9_10", "4hop1__1_2_3_4", "2hop__9_9"]


def test_table_rows_carry_intervals_equal_to_the_summary_and_n(tmp_path):
    f1 = dict(zip(MUSIQUE_IDS, [1.0, 0.5, 0.0, 0.25, 1.0, 0.0]))
    run = _run(tmp_path, "hgot", f1, failed=("2hop__9_9",))
    (row,) = collect_rows([run])
    summary = summarize(row.records.values(), run)
    assert row.metrics == summary.metrics and row.n == 6 and row.failed == 1
    values = [1.0, 0.5, 0.0, 0.0, 0.25, 1.0]  # in id order; the failed question (2hop__9_9) scores 0
    ref = stats.interval(values)
    assert row.metrics["f1"] == pytest.approx(ref.value) and row.intervals["f1"] == (ref.low, ref.high)
    assert row.intervals["llm_calls_per_q"] == (2.0, 2.0)
    table = markdown_table([row])
    header, _, line = table.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in line.split("|")]))
    assert cells["n"] == "6"
    assert cells["F1"] == f"{ref.value:.3f} ±{(ref.high - ref.low) / 2:.3f}"
    assert cells["s/q"] == "1.5 ±0.0"


def test_paired_comparison_by_id_names_ids_in_one_run_only(tmp_path):
    ids = [f"q{i}" for i in range(10)]
    base = _run(tmp_path, "retrieve-then-read", {q: 0.0 for q in ids} | {"only-base": 1.0})
    other = _run(tmp_path, "hgot", {q: (1.0 if i < 7 else 0.0) for i, q in enumerate(ids)}
                 | {"only-hgot-1": 0.0, "only-hgot-2": 1.0})
    rows = collect_rows([base, other])
    pairs = compare_rows(rows, "retrieve-then-read", metrics=["f1"])
    (pair,) = pairs
    assert pair.method == "hgot" and pair.baseline == "retrieve-then-read"
    assert pair.result == stats.compare([1.0] * 7 + [0.0] * 3, [0.0] * 10)  # the 10 shared ids only
    assert pair.only_method == ["only-hgot-1", "only-hgot-2"] and pair.only_baseline == ["only-base"]
    text, out = build_report([tmp_path], tmp_path / "report", baseline="retrieve-then-read", plots=True)
    assert "| f1 | hgot | retrieve-then-read | 10 | +0.700 [" in text and "| **yes** | 0.016 | 7 / 3 / 0 |" in text
    assert "2 ids only in hgot (only-hgot-1, only-hgot-2); 1 ids only in retrieve-then-read (only-base)" in text
    assert "compared on the 10 ids both recorded" in text
    report = json.loads((out / "report.json").read_text())
    f1 = next(c for c in report["comparisons"] if c["metric"] == "f1")
    assert f1["low"] == pytest.approx(pair.result.low) and f1["high"] == pytest.approx(pair.result.high)
    assert f1["excludes_zero"] is True and f1["significant"] is True and f1["wins"] == 7 and f1["only_in_baseline"] == ["only-base"]
    row = next(r for r in report["rows"] if r["method"] == "hgot")
    assert row["n"] == 12 and len(row["intervals"]["f1"]) == 2
    assert (out / "differences.png").stat().st_size > 0
    page = (out / "report.html").read_text()
    assert "Against the baseline" in page and "differences" in page and "[" in page
    again, _ = build_report([tmp_path], tmp_path / "report2", baseline="retrieve-then-read", plots=False)
    assert again == text  # fixed seed: the same report
    assert json.loads((tmp_path / "report2" / "report.json").read_text())["seed"] == stats.SEED


def test_the_same_results_in_another_order_give_the_same_report(tmp_path):
    """A resumed run or one with several workers records questions in another order: the
    intervals and comparisons are drawn in id order, so they do not change."""
    rng = np.random.default_rng(3)
    ids = [f"q{i:02d}" for i in range(30)]
    base_f1 = {q: float(rng.choice([0.0, 0.5, 1.0])) for q in ids}
    other_f1 = {q: float(rng.choice([0.0, 0.4, 1.0])) for q in ids}
    reports = []
    for name, order in (("sorted", ids), ("shuffled", list(rng.permutation(ids)))):
        _run(tmp_path / name, "retrieve-then-read", {q: base_f1[q] for q in order})
        _run(tmp_path / name, "hgot", {q: other_f1[q] for q in reversed(order)})
        rows = collect_rows([tmp_path / name / "retrieve-then-read", tmp_path / name / "hgot"])
        (pair,) = compare_rows(rows, "retrieve-then-read", metrics=["f1"])
        reports.append(([(r.method, r.intervals["f1"]) for r in rows], pair.result))
    assert reports[0] == reports[1]
    assert reports[0][1] == compare_by_id(other_f1, base_f1)  # what benchmarks/presets.py pairs with


def test_unknown_baseline_is_a_clear_error(tmp_path):
    _run(tmp_path, "hgot", {"a": 1.0})
    with pytest.raises(ValueError, match="no run of the baseline method 'cot'.*hgot"):
        build_report([tmp_path], tmp_path / "report", baseline="cot", plots=False)


def test_breakdown_by_hop_count_from_musique_ids(tmp_path):
    f1 = dict(zip(MUSIQUE_IDS, [1.0, 0.5, 0.0, 0.25, 1.0, 0.0]))
    rows = collect_rows([_run(tmp_path, "hgot", f1)], by=["hops"])
    by = {r.stratum: r for r in rows}
    assert list(by) == ["all", "hops=2", "hops=3", "hops=4"]
    assert by["hops=2"].n == 3 and by["hops=2"].metrics["f1"] == pytest.approx(0.5)
    assert by["hops=3"].n == 2 and by["hops=3"].metrics["f1"] == pytest.approx(0.125)
    assert by["hops=4"].n == 1 and by["hops=4"].metrics["f1"] == 1.0
    assert "| hops=3 | 2 |" in markdown_table(rows)


def test_breakdown_by_a_recorded_field_and_comparisons_within_it(tmp_path):
    ids = [f"h{i}" for i in range(6)]
    fields = {q: {"type": "comparison" if i % 2 else "bridge", "level": "hard"} for i, q in enumerate(ids)}
    fields.pop("h5")  # a question without the field
    base = _run(tmp_path, "retrieve-then-read", {q: 0.0 for q in ids}, dataset="hotpotqa", fields=fields)
    _run(tmp_path, "hgot", {q: 1.0 for q in ids}, dataset="hotpotqa", fields=fields)
    rows = collect_rows([tmp_path / "retrieve-then-read", tmp_path / "hgot"], by=["type"])
    strata = [r.stratum for r in rows if r.run == str(base)]
    assert strata == ["all", "type=(not recorded)", "type=bridge", "type=comparison"]
    pairs = compare_rows(rows, "retrieve-then-read", metrics=["f1"])
    assert {p.stratum: p.result.n for p in pairs} == {"all": 6, "type=(not recorded)": 1, "type=bridge": 3,
                                                      "type=comparison": 2}
    assert field_value({"id": "x", "status": "failed"}, "status") == "failed"
    assert field_value({"id": "2hop__1_2"}, "hops") == "2" and field_value({"id": "q"}, "hops") == "(not recorded)"


def test_a_partial_run_is_flagged_and_compared_on_shared_ids(tmp_path):
    ids = [f"q{i}" for i in range(8)]
    _run(tmp_path, "retrieve-then-read", {q: 0.5 for q in ids}, asked=8)
    _run(tmp_path, "hgot", {q: 1.0 for q in ids[:3]}, asked=8)
    text, out = build_report([tmp_path], tmp_path / "report", baseline="retrieve-then-read", metrics=["f1"])
    assert "| hgot | all | partial (3 of 8) |" in text and "| retrieve-then-read | all | 8 |" in text
    assert "5 ids only in retrieve-then-read" in text and "hgot partial (3 of 8)" in text
    assert "compared on the 3 ids both recorded" in text
    rows = json.loads((out / "report.json").read_text())["rows"]
    assert [(r["method"], r["partial"], r["asked"]) for r in rows] == [("hgot", True, 8),
                                                                        ("retrieve-then-read", False, 8)]
    assert "partial (3 of 8)" in (out / "report.html").read_text()


def test_two_runs_of_one_method_are_told_apart(tmp_path):
    _run(tmp_path / "json", "hgot", {"a": 1.0, "b": 0.0})
    _run(tmp_path / "free", "hgot", {"a": 0.0, "b": 0.0})
    rows = collect_rows([tmp_path / "json" / "hgot", tmp_path / "free" / "hgot"])
    assert [r.name for r in rows] == ["hgot (json)", "hgot (free)"]
    (pair,) = compare_rows(rows, "hgot (free)", metrics=["f1"])
    assert pair.method == "hgot (json)" and pair.result.diff == 0.5


# -- what the runner records for reports --------------------------------------------------------------
def test_runner_records_the_questions_asked_and_the_examples_fields(tmp_path):
    exs = [Example(id=f"2hop__{i}_1", question=f"What is item k{i}z?", answers=[f"item k{i}z"], dataset="toy",
                   split="dev", extras={"type": "bridge", "level": 3, "long": "x" * 500, "facts": [["a", 1]]})
           for i in range(3)]
    llm = ScriptedLLM(replies=lambda r: "item " + r.text().split("What is item ")[-1].split("?")[0])
    evaluate(build_method("direct", llm), exs, tmp_path / "run", setting="open", progress=False)
    assert read_asked(tmp_path / "run") == 3
    rec = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert rec["fields"] == {"type": "bridge", "level": 3}  # short scalars only
    (row,) = collect_rows([tmp_path / "run"])
    assert not row.partial and row.asked == 3
    (tmp_path / "run" / "questions.json").write_text("not json")
    assert read_asked(tmp_path / "run") is None


def test_report_cli_baseline_by_and_errors(tmp_path):
    ids = [f"2hop__{i}_0" for i in range(5)]
    _run(tmp_path / "runs", "retrieve-then-read", {q: 0.0 for q in ids})
    _run(tmp_path / "runs", "cot", {q: 1.0 for q in ids})
    base = [sys.executable, "-m", "hopqa.cli", "report", str(tmp_path / "runs"), "--out", str(tmp_path / "rep"),
            "--no-plots"]
    ok = subprocess.run(base + ["--baseline", "retrieve-then-read", "--by", "hops", "--metrics", "f1"],
                        capture_output=True, text=True, timeout=120, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "| musique/dev | distractor | hops=2 | f1 | cot | retrieve-then-read | 5 | +1.000 [+1.000, +1.000] |" \
        in ok.stdout
    bad = subprocess.run(base + ["--baseline", "nope"], capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and "no run of the baseline method 'nope'" in bad.stderr


def test_shipped_datasets_record_the_fields_reports_split_by():
    from hopqa.datasets import iter_dataset
    from hopqa.evaluation.runner import example_fields

    hotpot = example_fields(next(iter_dataset("hotpotqa", "dev")))
    assert hotpot["type"] in ("bridge", "comparison") and hotpot["level"] in ("easy", "medium", "hard")
    assert example_fields(next(iter_dataset("2wikimultihopqa", "dev")))["type"] in (
        "comparison", "inference", "compositional", "bridge_comparison")
    musique = next(iter_dataset("musique", "dev"))
    assert field_value({"id": musique.id}, "hops") in ("2", "3", "4")
