"""Benchmarks write their figures as JSON with where they came from (``benchmarks/figures.py``),
for ``benchmarks/doc_tables.py`` to render the docs' tables from: checked on ``eval_methods.py``,
``demo_choice.py``, ``presets.py``, ``tree_of_reviews.py``, ``structured_outputs.py`` and
``rerank.py`` against the fake server (two questions, no model), and on ``retrieval.py``'s engines
part (a tiny synthetic corpus)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fault_server import fault_server  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parent.parent


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, check=False)


def test_eval_methods_writes_its_rows_with_their_provenance(fault_server, tmp_path):  # noqa: F811
    server = fault_server()
    done = _run("eval_methods.py", "--llm", f"openai:fake@{server.url}", "--limit", "2", "--methods",
                "direct,retrieve-then-read", "--out", str(tmp_path / "bench"), "--figures", str(tmp_path / "f.json"),
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    about = figures["about"]
    assert about["command"].startswith("benchmarks/eval_methods.py --llm openai:fake@")
    assert about["llm"].startswith("openai:fake@") and about["limit"] == 2 and about["response_cache"] == "off"
    assert {"date", "machine", "dataset", "split", "setting"} <= about.keys()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # the commit of the hopqa that ran (+changes when hopqa/ is edited)
        assert about["hopqa"].removesuffix("+changes") == head.stdout.strip()
    rows = {r["method"]: r for r in figures["rows"]}
    assert set(rows) == {"direct", "retrieve-then-read"}
    summary = json.loads((tmp_path / "bench" / "musique-dev-distractor" / "direct" / "summary.json").read_text())
    assert rows["direct"]["metrics"] == summary["metrics"] and rows["direct"]["cost"] == summary["cost"]
    assert rows["direct"]["n"] == 2 and rows["retrieve-then-read"]["cost"]["retrieval_calls_per_q"] == 1.0
    assert not list(tmp_path.glob("*.tmp"))  # written whole, then renamed


def test_eval_methods_runs_the_hopqa_it_names_not_one_in_the_cwd(fault_server, tmp_path):  # noqa: F811
    """The figures name the commit of the hopqa the script imports (``PYTHONPATH`` first: a git
    worktree of an older commit); the runs must be that hopqa's too, not a ``hopqa/`` that happens
    to sit in the working directory (``python -m`` puts the cwd first unless ``-P``)."""
    server = fault_server()
    decoy = tmp_path / "hopqa"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the hopqa in the cwd was imported')\n")
    done = _run("eval_methods.py", "--llm", f"openai:fake@{server.url}", "--limit", "1", "--methods", "direct",
                "--out", str(tmp_path / "bench"), "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "f.json").read_text())["rows"][0]["n"] == 1


def test_demo_choice_writes_a_row_per_candidate_and_dataset(fault_server, tmp_path):  # noqa: F811
    server = fault_server()
    done = _run("demo_choice.py", "--llm", f"openai:fake@{server.url}", "--limit", "2", "--only",
                "retrieve-then-read", "--setting", "distractor", "--out", str(tmp_path / "demo"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "demo" / "figures.json").read_text())
    assert figures["about"]["datasets"] == ["musique", "hotpotqa"] and figures["about"]["setting"] == "distractor"
    assert [(r["label"], r["dataset"], r["n"]) for r in figures["rows"]] == [
        ("retrieve-then-read", "musique", 2), ("retrieve-then-read", "hotpotqa", 2)]
    assert all(len(r["f1_by_id"]) == 2 and r["llm"] == f"openai:fake@{server.url}" for r in figures["rows"])
    assert "| retrieve-then-read | " in done.stdout  # the table doc_tables renders from these rows


def test_presets_labels_each_run_by_its_variant(fault_server, tmp_path):  # noqa: F811
    """A report of one variant labels runs by method alone; the figures name the variant of a
    method with a preset, so that runs merged from several reports keep apart."""
    server = fault_server()
    done = _run("presets.py", "--llm", f"openai:fake@{server.url}", "--limit", "2", "--datasets", "musique",
                "--settings", "distractor", "--methods", "leapquery", "--variants", "small-model",
                "--baselines", "retrieve-then-read", "--out", str(tmp_path / "bench"), "--figures",
                str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (table,) = json.loads((tmp_path / "f.json").read_text())["tables"]
    assert {r["label"]: r["n"] for r in table["runs"]} == {"retrieve-then-read": 2, "leapquery (small-model)": 2}
    assert [c["method"] for c in table["vs_retrieve_then_read"]] == ["leapquery (small-model)"]
    first, second = table["runs"]
    assert len(first["f1_by_id"]) == 2 and first["f1_by_id"].keys() == second["f1_by_id"].keys()


def test_a_variant_of_a_preset_is_labelled_by_the_options_set_over_it(fault_server, tmp_path):  # noqa: F811
    """--preset-set NAME=VALUE: the preset's runs take the option (their config records it) and
    are labelled, and compared with the defaults, by it; the defaults' runs do not take it."""
    server = fault_server()
    done = _run("presets.py", "--llm", f"openai:fake@{server.url}", "--limit", "2", "--datasets", "musique",
                "--settings", "distractor", "--methods", "leapquery", "--baselines", "", "--preset-set", "k=3",
                "--out", str(tmp_path / "bench"), "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (table,) = json.loads((tmp_path / "f.json").read_text())["tables"]
    assert {r["label"] for r in table["runs"]} == {"leapquery (defaults)", "leapquery (small-model, k=3)"}
    assert [c["method"] for c in table["preset_vs_defaults"]] == ["leapquery (k=3)"]
    config = {v: json.loads((tmp_path / "bench" / v / "musique-dev-distractor" / "leapquery" / "config.json").read_text())
              for v in ("defaults", "small-model")}
    assert config["small-model"]["options"]["k"] == 3 and config["defaults"]["options"]["k"] != 3


def test_presets_without_a_baseline_compares_each_preset_with_its_defaults(fault_server, tmp_path):  # noqa: F811
    """``--baselines ""``: no Retrieve-then-Read run, so nothing is compared with it, and each
    preset is still compared with its defaults on the same questions."""
    server = fault_server()
    done = _run("presets.py", "--llm", f"openai:fake@{server.url}", "--limit", "2", "--datasets", "musique",
                "--settings", "distractor", "--methods", "self-dc", "--baselines", "", "--out",
                str(tmp_path / "bench"), "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    assert " --baselines '' --out " in figures["about"]["command"]  # quoted: it runs again as recorded
    (table,) = figures["tables"]
    assert {r["label"] for r in table["runs"]} == {"self-dc (defaults)", "self-dc (small-model)"}
    assert table["vs_retrieve_then_read"] == []
    (against,) = table["preset_vs_defaults"]
    assert (against["method"], against["n"]) == ("self-dc", 2)
    target = tmp_path / "presets.json"
    target.write_text(json.dumps({"about": {"date": "2026-11-27"}, "tables": []}))
    # a run of another method in the same folder is not reported with --methods self-dc
    shutil.copytree(tmp_path / "bench" / "defaults" / "musique-dev-distractor" / "self-dc",
                    tmp_path / "bench" / "defaults" / "musique-dev-distractor" / "leapquery")
    done = _run("presets.py", "--report-only", "--datasets", "musique", "--settings", "distractor", "--methods",
                "self-dc", "--out", str(tmp_path / "bench"), "--figures", str(tmp_path / "again.json"),
                "--merge-into", str(target), "--merge-note", "Self-DC on two questions", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "added the table musique, distractor" in done.stdout
    merged = json.loads(target.read_text())
    assert merged["tables"] == [table] and merged["about"]["merged"][0]["what"] == "Self-DC on two questions"


def _figures_of(script: str, server, tmp_path: Path, *args: str) -> dict:
    """Run ``script`` on the fake server's musique dev (retrieve-then-read and IRCoT, one question)
    into ``tmp_path / "out"``; the figures it wrote there, whose command names the script."""
    done = _run(script, "--llm", f"openai:fake@{server.url}", "--datasets", "musique", "--methods",
                "retrieve-then-read,ircot", "--out", str(tmp_path / "out"), *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "out" / "figures.json").read_text())
    assert figures["about"]["command"].startswith(f"benchmarks/{script} --llm openai:fake@")
    return figures


def test_tree_of_reviews_writes_a_row_per_dataset_and_method(fault_server, tmp_path):  # noqa: F811
    figures = _figures_of("tree_of_reviews.py", fault_server(), tmp_path, "--limits", "1")
    assert figures["about"]["datasets"] == ["musique"] and figures["about"]["response_cache"] == "off"
    assert [(r["dataset"], r["method"], r["n"]) for r in figures["rows"]] == [
        ("musique", "retrieve-then-read", 1), ("musique", "ircot", 1)]
    assert figures["rows"][0]["cost"]["retrieval_calls_per_q"] == 1.0 and "f1" in figures["rows"][1]["metrics"]
    (qid,) = figures["rows"][1]["f1_by_id"]  # for doc_numbers.py to pair the runs
    assert figures["rows"][1]["f1_by_id"][qid] == figures["rows"][1]["metrics"]["f1"]
    # --merge: a dataset measured another day keeps its rows and its about; the one re-run is replaced
    target = tmp_path / "tree-of-reviews.json"
    other = {"dataset": "2wikimultihopqa", "method": "tor", "n": 10, "failed": 0, "metrics": {}, "cost": {}}
    target.write_text(json.dumps({"about": {"date": "2026-11-24", "command": "benchmarks/tree_of_reviews.py",
                                            "datasets": ["2wikimultihopqa", "musique"]},
                                  "rows": [other, {**other, "dataset": "musique"}]}))
    done = _run("tree_of_reviews.py", "--report-only", "--datasets", "musique", "--methods", "retrieve-then-read,ircot",
                "--out", str(tmp_path / "out"), "--figures", str(target), "--merge", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    merged = json.loads(target.read_text())
    assert merged["rows"] == [other, *figures["rows"]]
    assert merged["about"]["datasets"] == ["2wikimultihopqa", "musique"]
    assert [(e["date"], e["datasets"]) for e in merged["about"]["earlier"]] == [("2026-11-24", ["2wikimultihopqa"])]
    # merged again: each kept dataset keeps the about of the run that measured it
    done = _run("tree_of_reviews.py", "--report-only", "--datasets", "musique", "--methods", "retrieve-then-read",
                "--out", str(tmp_path / "out"), "--figures", str(target), "--merge", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = json.loads(target.read_text())
    assert again["about"]["earlier"] == merged["about"]["earlier"] and again["rows"] == [other, figures["rows"][0]]


def test_structured_outputs_writes_a_row_per_method_and_mode(fault_server, tmp_path):  # noqa: F811
    figures = _figures_of("structured_outputs.py", fault_server(), tmp_path, "--limit", "1")
    assert [(r["method"], r["structured"], r["n"]) for r in figures["rows"]] == [
        ("retrieve-then-read", None, 1), ("ircot", "auto", 1), ("ircot", "off", 1)]
    assert all(r["rtr_n_same"] == 1 for r in figures["rows"]) and figures["confidence_histograms"] == []
    assert all(len(r["f1_by_id"]) == 1 for r in figures["rows"])


def test_gensco_answer_writes_its_rows_from_the_reasked_answers(tmp_path):
    """``benchmarks/gensco_answer.py --report-only --figures``: a row per dataset and mode from the
    answers already re-asked (no model), EM / F1 of the stored and the short answers, each by
    question id, and the answers that changed."""
    runs = tmp_path / "runs"
    (runs / "auto" / "musique-dev-distractor" / "gensco-stop").mkdir(parents=True)
    (runs / "auto" / "musique-dev-distractor" / "gensco-stop" / "results.jsonl").write_text("")
    (runs / "gensco-answer").mkdir()
    answers = [{"id": "q1", "gold": ["Kris Benson"], "paper": "Her husband is Kris Benson", "short": "Kris Benson"},
               {"id": "q2", "gold": ["Stanley"], "paper": "Stanley", "short": "Stanley"}]
    (runs / "gensco-answer" / "auto-musique.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    done = _run("gensco_answer.py", "--runs", str(runs), "--modes", "auto", "--datasets", "musique", "--report-only",
                "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "| MuSiQue | auto | 2 | 0.50 | 0.79 | 1.00 | 1.00 |" in done.stdout
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["about"]["command"].startswith("benchmarks/gensco_answer.py --runs")
    [row] = figures["rows"]
    assert row["short"] == {"em": 1.0, "f1": 1.0} and row["f1_by_id_paper"]["q2"] == 1.0
    assert [c["id"] for c in row["changed"]] == ["q1"]


def test_retrieval_writes_each_parts_rows(tmp_path):
    """``benchmarks/retrieval.py --figures``: the engines part on a tiny synthetic corpus (no
    model), a row per engine with its numbers, as docs/results/retrieval.json holds them."""
    done = _run("retrieval.py", "--part", "engines", "--sizes", "300", "--figures", str(tmp_path / "f.json"),
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["about"]["parts"] == ["engines"] and figures["about"]["command"].startswith("benchmarks/retrieval.py")
    engines = figures["rows"]["engines"]
    assert [(r["passages"], r["engine"].split()[0]) for r in engines] == [(300, "bm25s"), (300, "tantivy")]
    assert all(r["p95_ms"] >= r["p50_ms"] > 0 and r["index_mb"] > 0 for r in engines)
    faiss_rows = figures["rows"]["faiss"]
    assert [r["index"] for r in faiss_rows] == ["flat", "hnsw"] and faiss_rows[0]["recall_at_10"] == 1.0


def test_foundation_writes_each_parts_rows(fault_server, tmp_path):  # noqa: F811
    """``benchmarks/foundation.py --figures`` against the fake server (its log-likelihoods by
    ``echo``): one row each for BM25 over the demo corpus, the response cache and the LLM."""
    server = fault_server()
    spec = f"openai:fake@{server.url}?loglikelihood=echo"
    done = _run("foundation.py", "--llm", spec, "--home", str(tmp_path / "home"), "--figures", str(tmp_path / "f.json"),
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "f.json").read_text())["rows"]
    assert rows["bm25"][0]["passages"] > 10_000 and 0 < rows["bm25"][0]["recall_at_10_any"] <= 1
    assert rows["cache"][0]["calls"] == 500 and rows["cache"][0]["hit_ms"] > 0
    llm = rows["llm"][0]
    assert llm["llm"] == spec and llm["prompt_tokens"] > 0 and llm["loglikelihood_tokens"] > 0


def _presets_module(monkeypatch):
    import importlib.util

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("presets_bench", ROOT / "benchmarks" / "presets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stored_run(label: str, by_id: dict[str, float]) -> dict:
    """A run as presets.json stores it, with its F1 by id."""
    return {"label": label, "method": label.split()[0], "n": len(by_id), "asked": len(by_id), "partial": False,
            "f1": sum(by_id.values()) / len(by_id), "median_seconds": 1.0, "f1_by_id": by_id}


def test_presets_merges_its_figures_into_a_figures_file(monkeypatch, tmp_path):
    """--merge-into: a run replaces the run of its label or is added with its comparisons, a
    table is added, a run with F1 by id but no comparison (a replaced run's old one goes) is
    paired with Retrieve-then-Read as the report pairs runs, and the merge is recorded."""
    from hopqa.evaluation.report import compare_by_id

    presets = _presets_module(monkeypatch)
    ids = [f"q{i}" for i in range(8)]
    rtr = {q: float(i % 2) for i, q in enumerate(ids)}
    old_run = {q: 0.0 for q in ids}
    kept = {q: float(i % 3 == 0) for i, q in enumerate(ids)}

    target = tmp_path / "presets.json"
    target.write_text(json.dumps({"about": {"date": "2026-11-27", "command": "first"}, "tables": [
        {"dataset": "musique", "setting": "open", "preset_vs_defaults": [],
         "runs": [_stored_run("retrieve-then-read", rtr), _stored_run("hgot (small-model)", old_run), _stored_run("self-dc (defaults)", kept)],
         "vs_retrieve_then_read": [{"method": "hgot (small-model)", "n": 8, "diff": -0.5, "low": -0.9, "high": -0.1},
                                   {"method": "self-dc (defaults)", "n": 8, "diff": -0.5, "low": -0.9, "high": -0.1}]}]}))
    better = {q: 1.0 for q in ids}
    new = {"about": {"date": "2026-11-28", "command": "benchmarks/presets.py --report-only", "machine": "m"},
           "tables": [{"dataset": "musique", "setting": "open", "preset_vs_defaults": [],
                       "runs": [_stored_run("retrieve-then-read", rtr), _stored_run("hgot (small-model)", better),
                                _stored_run("self-dc (defaults)", kept)],  # re-reported: its stale comparison goes
                       "vs_retrieve_then_read": [presets._paired(compare_by_id(better, rtr), "hgot (small-model)")]},
                      {"dataset": "hotpotqa", "setting": "distractor", "runs": [], "vs_retrieve_then_read": [],
                       "preset_vs_defaults": []}]}
    log = presets.merge_figures(new, target, "HGOT re-run")
    merged = json.loads(target.read_text())
    (musique, hotpot) = merged["tables"]
    assert hotpot["dataset"] == "hotpotqa" and "added the table hotpotqa, distractor" in log
    assert [r["label"] for r in musique["runs"]] == ["retrieve-then-read", "hgot (small-model)", "self-dc (defaults)"]
    assert musique["runs"][1]["f1_by_id"] == better
    against = {c["method"]: c for c in musique["vs_retrieve_then_read"]}
    assert against.keys() == {"hgot (small-model)", "self-dc (defaults)"}
    assert against["hgot (small-model)"]["diff"] == 0.5
    expected = compare_by_id(kept, rtr)
    assert (against["self-dc (defaults)"]["low"], against["self-dc (defaults)"]["high"]) == (expected.low, expected.high)
    assert any(line.startswith("paired musique, open: self-dc (defaults)") for line in log)
    assert merged["about"]["command"] == "first"
    assert merged["about"]["merged"] == [{"date": "2026-11-28", "command": "benchmarks/presets.py --report-only",
                                          "machine": "m", "what": "HGOT re-run"}]


def test_a_merged_defaults_run_is_paired_again_with_its_stored_presets(monkeypatch, tmp_path):
    """A defaults run grown from 4 to 8 questions, merged while its presets' runs are gone from
    disk: each stored preset (``tor`` and ``tor (reader=short)``) is paired with it again from
    their F1 by id; another method's comparison stays as it was."""
    from hopqa.evaluation.report import compare_by_id

    presets = _presets_module(monkeypatch)
    assert presets.preset_labels("tor") == ("tor (small-model)", "tor (defaults)")
    assert presets.preset_labels("tor (reader=short)") == ("tor (small-model, reader=short)", "tor (defaults)")
    ids = [f"q{i}" for i in range(8)]

    preset = {q: float(i % 2) for i, q in enumerate(ids)}
    short = {q: 1.0 for q in ids}
    grown = {q: float(i >= 6) for i, q in enumerate(ids)}
    stale = {"method": "tor", "n": 4, "diff": 0.25, "low": 0.0, "high": 0.5, "p_value": 1.0, "wins": 1, "ties": 3,
             "losses": 0}
    other = {**stale, "method": "self-dc"}
    target = tmp_path / "presets.json"
    target.write_text(json.dumps({"about": {"date": "2026-11-28", "command": "first"}, "tables": [
        {"dataset": "musique", "setting": "distractor", "vs_retrieve_then_read": [],
         "runs": [_stored_run("tor (defaults)", dict(list(grown.items())[:4])), _stored_run("tor (small-model)", preset),
                  _stored_run("tor (small-model, reader=short)", short), _stored_run("self-dc (small-model)", preset),
                  _stored_run("self-dc (defaults)", grown)],
         "preset_vs_defaults": [stale, {**stale, "method": "tor (reader=short)"}, other]}]}))
    new = {"about": {"date": "2026-11-30", "command": "benchmarks/presets.py --variants defaults", "machine": "m"},
           "tables": [{"dataset": "musique", "setting": "distractor", "runs": [_stored_run("tor (defaults)", grown)],
                       "vs_retrieve_then_read": [], "preset_vs_defaults": []}]}
    log = presets.merge_figures(new, target, "ToR defaults to 8")
    (table,) = json.loads(target.read_text())["tables"]
    by = {c["method"]: c for c in table["preset_vs_defaults"]}
    for name, tuned in (("tor", preset), ("tor (reader=short)", short)):
        expected = compare_by_id(tuned, grown)
        assert (by[name]["n"], by[name]["diff"], by[name]["low"], by[name]["high"], by[name]["wins"]) == (
            8, expected.diff, expected.low, expected.high, expected.wins), name
    assert by["self-dc"] == other  # neither of its runs was replaced
    assert sum(line.startswith("paired musique, distractor: tor (small-model") for line in log) == 2


def test_a_merged_defaults_run_is_compared_with_presets_never_compared(monkeypatch, tmp_path):
    """The first defaults run of a method whose presets are stored (their runs gone from disk):
    each stored preset of that method gets its comparison from the F1 by id; a preset whose
    defaults are not stored, and a run of no preset, get none."""
    from hopqa.evaluation.report import compare_by_id

    presets = _presets_module(monkeypatch)
    assert presets.comparison_name("tor (small-model)") == "tor"
    assert presets.comparison_name("tor (small-model, reader=short)") == "tor (reader=short)"
    assert presets.comparison_name("tor (defaults)") is None and presets.comparison_name("ircot") is None
    ids = [f"q{i}" for i in range(6)]

    preset = {q: float(i % 2) for i, q in enumerate(ids)}
    short = {q: 1.0 for q in ids}
    defaults = {q: float(i >= 4) for i, q in enumerate(ids)}
    target = tmp_path / "presets.json"
    target.write_text(json.dumps({"about": {"date": "2026-11-28", "command": "first"}, "tables": [
        {"dataset": "musique", "setting": "open", "vs_retrieve_then_read": [],
         "runs": [_stored_run("tor (small-model)", preset), _stored_run("tor (small-model, reader=short)", short),
                  _stored_run("gensco-stop (small-model)", preset), _stored_run("ircot", preset)],
         "preset_vs_defaults": []}]}))
    new = {"about": {"date": "2026-11-30", "command": "benchmarks/presets.py --variants defaults", "machine": "m"},
           "tables": [{"dataset": "musique", "setting": "open", "runs": [_stored_run("tor (defaults)", defaults)],
                       "vs_retrieve_then_read": [], "preset_vs_defaults": []}]}
    presets.merge_figures(new, target, "ToR defaults")
    (table,) = json.loads(target.read_text())["tables"]
    by = {c["method"]: c for c in table["preset_vs_defaults"]}
    assert set(by) == {"tor", "tor (reader=short)"}
    for name, tuned in (("tor", preset), ("tor (reader=short)", short)):
        expected = compare_by_id(tuned, defaults)
        assert (by[name]["n"], by[name]["diff"], by[name]["low"], by[name]["high"], by[name]["wins"],
                by[name]["losses"]) == (6, expected.diff, expected.low, expected.high, expected.wins, expected.losses)


def test_an_extended_run_joins_its_part_and_is_paired_again(monkeypatch, tmp_path):
    """--extend: a run's next questions (measured with --skip) join the stored run of its label,
    F1 by id and seconds by id joined, the median over the questions with known seconds (a count
    when some are missing); its comparisons with Retrieve-then-Read and with its defaults are
    paired again on every question, the part's own (on its questions alone) left out; another
    run's stay."""
    from hopqa.evaluation.report import compare_by_id

    presets = _presets_module(monkeypatch)
    ids = [f"q{i}" for i in range(12)]
    rtr = {q: float(i % 2) for i, q in enumerate(ids)}
    first, rest = ids[:4], ids[4:]
    preset = {q: 1.0 for q in ids}
    defaults = {q: float(i % 3 == 0) for i, q in enumerate(ids)}
    stored_preset = {**_stored_run("hgot (small-model)", {q: preset[q] for q in first}), "median_seconds": 200.0}
    stored_defaults = {**_stored_run("hgot (defaults)", {q: defaults[q] for q in first}),
                       "seconds_by_id": {q: 100.0 for q in first}}
    other = {"method": "self-dc", "n": 12, "diff": 0.1, "low": 0.0, "high": 0.2, "p_value": 0.5, "wins": 1, "ties": 11,
             "losses": 0}
    stale = {**other, "method": "hgot", "n": 4}
    target = tmp_path / "presets.json"
    target.write_text(json.dumps({"about": {"date": "2026-11-28", "command": "first"}, "tables": [
        {"dataset": "hotpotqa", "setting": "distractor",
         "runs": [_stored_run("retrieve-then-read", rtr), stored_preset, stored_defaults,
                  _stored_run("self-dc (small-model)", rtr), _stored_run("self-dc (defaults)", rtr)],
         "vs_retrieve_then_read": [{**stale, "method": "hgot (small-model)"}, {**stale, "method": "hgot (defaults)"}],
         "preset_vs_defaults": [stale, other]}]}))
    part_preset = {**_stored_run("hgot (small-model)", {q: preset[q] for q in rest}),
                   "seconds_by_id": {q: 300.0 for q in rest}, "skip": 4}
    part_defaults = {**_stored_run("hgot (defaults)", {q: defaults[q] for q in rest}),
                     "seconds_by_id": {q: 50.0 for q in rest}, "skip": 4}
    part_stale = {**stale, "n": 8}
    new = {"about": {"date": "2026-12-02", "command": "benchmarks/presets.py --skip 4 --limit 8", "machine": "m"},
           "tables": [{"dataset": "hotpotqa", "setting": "distractor", "runs": [part_preset, part_defaults],
                       "vs_retrieve_then_read": [{**part_stale, "method": "hgot (small-model)"}],
                       "preset_vs_defaults": [part_stale]}]}
    log = presets.merge_figures(new, target, "HGOT questions 5 to 12", extend=True)
    (table,) = json.loads(target.read_text())["tables"]
    runs = {r["label"]: r for r in table["runs"]}
    tuned, base = runs["hgot (small-model)"], runs["hgot (defaults)"]
    assert (tuned["n"], tuned["asked"], tuned["partial"], tuned["f1_by_id"]) == (12, 12, False, preset)
    assert base["f1_by_id"] == defaults and base["f1"] == sum(defaults.values()) / 12
    assert (tuned["median_seconds"], tuned["median_seconds_n"]) == (300.0, 8)  # the first part's seconds unknown
    assert base["median_seconds"] == 50.0 and "median_seconds_n" not in base
    against = {c["method"]: c for c in table["vs_retrieve_then_read"]}
    for label, by_id in (("hgot (small-model)", preset), ("hgot (defaults)", defaults)):
        assert (against[label]["n"], against[label]["diff"]) == (12, compare_by_id(by_id, rtr).diff), label
    by = {c["method"]: c for c in table["preset_vs_defaults"]}
    expected = compare_by_id(preset, defaults)
    assert (by["hgot"]["n"], by["hgot"]["diff"], by["hgot"]["low"]) == (12, expected.diff, expected.low)
    assert by["self-dc"] == other
    assert sum(line.startswith("extended hotpotqa, distractor: runs hgot") for line in log) == 2
    # the preset without its choice step, read off the stored run, grows with it: the part had no
    # choice step (its figures bring no such run), so its answers are the preset's own
    derived = {**_stored_run("hgot (small-model, no choice)", {q: 0.0 for q in first}),
               "derived_from": "hgot (small-model)", "answer_before": "choice", "median_seconds": None}
    target.write_text(json.dumps({"about": {"date": "2026-11-28", "command": "first"}, "tables": [
        {"dataset": "hotpotqa", "setting": "distractor", "runs": [_stored_run("retrieve-then-read", rtr), stored_preset,
                                                                  stored_defaults, derived],
         "vs_retrieve_then_read": [], "preset_vs_defaults": []}]}))
    log = presets.merge_figures(new, target, "HGOT questions 5 to 12", extend=True)
    runs = {r["label"]: r for r in json.loads(target.read_text())["tables"][0]["runs"]}
    grown = runs["hgot (small-model, no choice)"]
    assert grown["f1_by_id"] == {**{q: 0.0 for q in first}, **{q: preset[q] for q in rest}}
    assert (grown["n"], grown["median_seconds"], grown["derived_from"]) == (12, None, "hgot (small-model)")
    by = {c["method"]: c for c in json.loads(target.read_text())["tables"][0]["preset_vs_defaults"]}
    assert by["hgot (no choice)"]["n"] == 12 and "extended hotpotqa, distractor: runs hgot (small-model, no choice) " \
        "(n 12, F1 0.667)" in log
    assert presets.derived_parts([derived], [part_preset, {**derived, "f1_by_id": {}}]) == []  # brought: its own
    # a derived run first brought by a later part: the stored preset's earlier questions join it
    target.write_text(json.dumps({"about": {"date": "2026-11-28", "command": "first"}, "tables": [
        {"dataset": "hotpotqa", "setting": "distractor", "runs": [_stored_run("retrieve-then-read", rtr), stored_preset,
                                                                  stored_defaults],
         "vs_retrieve_then_read": [], "preset_vs_defaults": []}]}))
    later = {**derived, "f1_by_id": {q: 0.0 for q in rest}, "n": 8, "asked": 8, "skip": 4}
    presets.merge_figures({**new, "tables": [{**new["tables"][0], "runs": [part_preset, part_defaults, later]}]},
                          target, "HGOT questions 5 to 12", extend=True)
    runs = {r["label"]: r for r in json.loads(target.read_text())["tables"][0]["runs"]}
    assert runs["hgot (small-model, no choice)"]["f1_by_id"] == {**{q: preset[q] for q in first}, **later["f1_by_id"]}
    with pytest.raises(ValueError, match="cannot extend"):
        presets.extended_run(_stored_run("tor (defaults)", {"q0": 1.0}), _stored_run("hgot (defaults)", {"q1": 0.0}))
    # a run stopped after 3 of its 5 questions, continued from the 4th: 5 asked, complete
    stopped = {**_stored_run("tor (defaults)", {"q0": 1.0, "q1": 0.0, "q2": 1.0}), "asked": 5, "partial": True}
    joined = presets.extended_run(stopped, {**_stored_run("tor (defaults)", {"q3": 1.0, "q4": 1.0}), "skip": 3})
    assert (joined["n"], joined["asked"], joined["partial"], joined["f1"]) == (5, 5, False, 0.8)
    with pytest.raises(ValueError, match="give the part's --skip"):  # questions 6-10 merged as if 1-5
        presets.extended_run(_stored_run("tor (defaults)", {f"q{i}": 1.0 for i in range(5)}),
                             _stored_run("tor (defaults)", {f"q{i}": 1.0 for i in range(5, 10)}))
    with pytest.raises(ValueError, match="questions 6 to 7 were asked of neither"):
        presets.extended_run(stopped, {**_stored_run("tor (defaults)", {"q7": 1.0}), "skip": 7})


def test_eval_stream_adds_its_row_by_label(tmp_path):
    """``eval_stream.py --figures``: a row a run, named by ``--label``, each with its own about; a
    second run of the same label replaces its row, another label's row stays."""
    # a server that takes 0.05 s a request: 3,000 questions cannot all be answered before Ctrl-C
    args = ("--lines", "3000", "--bad-every", "3", "--answers", "3", "--workers", "1", "--delay", "0.05",
            "--figures", str(tmp_path / "f.json"))
    for label in ("before", "now", "now"):
        done = _run("eval_stream.py", *args, "--label", label, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "f.json").read_text())["rows"]
    assert [r["label"] for r in rows] == ["before", "now"]
    now = rows[1]
    assert now["about"]["command"].startswith("benchmarks/eval_stream.py --lines 3000")
    assert now["lines"] == 3000 and now["first_s"] > 0 and now["peak_mb"] > 0
    assert now["returncode"] == 130 and now["exit_s"] is not None  # Ctrl-C ends it at once
    assert now["warning_lines"] >= 1  # the 1,000 bad lines: 20 warned one by one, then counted


def test_rerank_writes_a_row_per_dataset_and_reranker(fault_server, tmp_path):  # noqa: F811
    """``rerank.py`` against the fake server (its replies name no score: every passage unparsed,
    ranked last in BM25's order): BM25's own order and the LLM judge, with the judge's reply form."""
    from hopqa.retrieval.rerank import JSON_REPLY, UNPARSED_SCORE

    server = fault_server()
    done = _run("rerank.py", "--llm", f"openai:fake@{server.url}", "--limit", "2", "--datasets", "musique",
                "--depth", "3", "--k", "2", "--rerankers", "none,llm", "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["about"]["command"].startswith("benchmarks/rerank.py --llm openai:fake@")
    assert (figures["about"]["depth"], figures["about"]["k"], figures["about"]["limit"]) == (3, 2, 2)
    none, judge = figures["rows"]
    assert (none["reranker"], none["questions"], none["changed"], none["most_given"]) == ("none", 2, 0, [])
    assert (judge["reranker"], judge["form"], judge["tied"]) == ("llm", JSON_REPLY, 1.0)
    assert judge["most_given"] == [[UNPARSED_SCORE, 6]] and judge["changed"] == 0  # ties keep BM25's order
    assert judge["recall"] == none["recall"]
    assert "| musique | llm | 2 |" in done.stdout
    # the expected-score judge scores each rating through the server's echoed log-probabilities
    done = _run("rerank.py", "--llm", f"openai:fake@{server.url}?loglikelihood=echo", "--limit", "2", "--datasets",
                "musique", "--depth", "3", "--k", "2", "--rerankers", "llm-expected", "--figures",
                str(tmp_path / "e.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (expected,) = json.loads((tmp_path / "e.json").read_text())["rows"]
    assert (expected["reranker"], expected["questions"], expected["most_given"]) == ("llm-expected", 2, [])
    assert "form" not in expected and 1.0 <= expected["distinct"] <= 3.0



def test_leapquery_writes_its_rows_paired_with_retrieve_then_read(fault_server, monkeypatch, tmp_path):  # noqa: F811
    """``leapquery.py --figures`` against the fake server: a row a method that ran, with its
    reranker from the run's config, F1 by question id, and its paired F1 against
    Retrieve-then-Read's (none for Retrieve-then-Read itself); the printed table is the docs' renderer's."""
    from hopqa.evaluation.report import compare_by_id

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import doc_tables

    server = fault_server()
    done = _run("leapquery.py", "--llm", f"openai:fake@{server.url}", "--limit", "2", "--retriever", "bm25",
                "--bertscore", "", "--methods", "retrieve-then-read,leapquery-bi-encoder,leapquery-hybrid",
                "--out", str(tmp_path / "bench"), "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    about = figures["about"]
    assert about["command"].startswith("benchmarks/leapquery.py --llm openai:fake@")
    assert (about["dataset"], about["setting"], about["retriever"], about["limit"], about["bertscore"]) == \
        ("musique", "open", "bm25", 2, None)
    rows = figures["rows"]
    assert [(r["method"], r["rerank"], r["n"]) for r in rows] == [
        ("retrieve-then-read", "–", 2), ("leapquery-bi-encoder", "bi-encoder", 2), ("leapquery-hybrid", "hybrid", 2)]
    rtr, bi, _ = rows
    assert rtr["vs_retrieve_then_read"] is None and rtr["bertscore"] is None
    assert len(rtr["f1_by_id"]) == 2 and rtr["f1_by_id"].keys() == bi["f1_by_id"].keys()
    expected = compare_by_id(bi["f1_by_id"], rtr["f1_by_id"])
    assert bi["vs_retrieve_then_read"]["n"] == 2 and bi["vs_retrieve_then_read"]["diff"] == expected.diff
    assert doc_tables.leapquery_rerankers_table(rows) in done.stdout


def _run_with(path: Path, llm: str, records: list[dict]) -> None:
    """A stored run: ``results.jsonl`` (these records) and its ``config.json``."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"llm": llm}))
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _record(qid: str, prediction: str, seconds: float, calls: list[dict]) -> dict:
    """A record whose trace holds ``calls``: the first in the root step, the rest in a child step."""
    return {"id": qid, "status": "ok", "prediction": prediction, "usage": {"seconds": seconds},
            "trace": {"id": 0, "kind": "root", "llm_calls": calls[:1],
                      "children": [{"id": 1, "kind": "step", "llm_calls": calls[1:], "children": []}]}}


def test_prefix_share_writes_a_row_a_run_with_its_shares(tmp_path):
    """``prefix_share.py --figures`` on a hand-made run: three prompts of one question, the
    second repeating 3 characters of the first, the third 6 of the first and 3 of the second."""
    prompts = ["ABCDEF", "ABCxyz", "ABCDEFG"]
    _run_with(tmp_path / "off" / "tor", "embedded:x", [_record("q1", "a", 1.0, [{"prompt": p} for p in prompts])])
    done = _run("prefix_share.py", str(tmp_path / "off"), "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["about"]["command"].startswith("benchmarks/prefix_share.py ")
    (row,) = figures["rows"]
    assert (row["run"], row["llm"], row["n"], row["calls_per_q"], row["chars_per_q"]) == ("tor", "embedded:x", 1, 3, 19)
    assert row["previous"] == 6 / 19 and row["earlier"] == 9 / 19
    assert "| tor | embedded:x | 1 | 3.0 | 19 | 32% | 47% |" in done.stdout


def test_prefix_cache_rows_pair_each_method_with_the_cache_on_and_off(monkeypatch, tmp_path):
    """``prefix_cache.py``'s rows on hand-made runs (no model): per question the tokens sent and
    evaluated, the speed-up, and how many answers and LLM outputs stayed identical."""
    import argparse
    import importlib.util

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("prefix_cache_bench", ROOT / "benchmarks" / "prefix_cache.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import doc_tables

    def call(evaluated: int, output: str) -> dict:
        return {"prompt": "p", "prompt_tokens": 100, "prompt_tokens_evaluated": evaluated, "completion_tokens": 5,
                "outputs": [output]}

    run = "musique-dev-distractor/tor"
    _run_with(tmp_path / "off" / "tor" / run, "embedded:x?prefix_cache_mb=0",
              [_record("q1", "a", 4.0, [call(100, "x"), call(100, "y")]), _record("q2", "b", 6.0, [call(100, "z")])])
    _run_with(tmp_path / "on" / "tor" / run, "embedded:x",
              [_record("q1", "a", 2.0, [call(100, "x"), call(20, "y")]), _record("q2", "c", 3.0, [call(100, "w")])])
    args = argparse.Namespace(methods="tor,hgot", out=str(tmp_path), llm="embedded:x")
    off, on = module.rows(args, {"tor/on": 2048.0})
    assert (off["setting"], off["n"], off["calls_per_q"], off["sent_per_q"], off["evaluated_per_q"]) == ("off", 2, 1.5, 150, 150)
    assert off["speedup"] is None and off["shared"] is None and off["peak_rss_mb"] is None
    assert (on["setting"], on["evaluated_per_q"], on["seconds_per_q"], on["speedup"]) == ("on", 110, 2.5, 2.0)
    assert (on["shared"], on["answers_identical"], on["outputs_identical"], on["peak_rss_mb"]) == (2, 1, 1, 2048.0)
    table = doc_tables.prefix_cache_table([off, on])
    assert "| tor | on | 2 | 1.5 | 150 | 110 (73%) | 8 | 2.5 (2.00×) | 1 / 2 | 1 / 2 | 2,048 MB |" in table


@pytest.mark.slow
def test_loglikelihood_scores_the_same_pairs_token_by_token_and_in_batches(tmp_path):
    """``loglikelihood.py`` on SmolLM2: both settings score the same pairs (2 per question) and
    the rows carry the speed-up and the largest logprob difference against the first (which
    differs: llama.cpp's kernels for a batch of one token are not those for many)."""
    done = _run("loglikelihood.py", "--llm", "embedded:smollm2-135m", "--limit", "2", "--rows", "1,64",
                "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["about"]["command"].startswith("benchmarks/loglikelihood.py --llm embedded:smollm2-135m")
    one, batched = figures["rows"]
    assert (one["rows_per_batch"], batched["rows_per_batch"], one["pairs"], batched["pairs"]) == (1, 64, 4, 4)
    assert one["tokens_per_pair"] == batched["tokens_per_pair"] > 5
    assert (one["speedup"], one["max_diff"]) == (1.0, 0.0) and batched["speedup"] > 0 and 0 < batched["max_diff"] < 1
    assert "| 64 | 4 |" in done.stdout


def test_eval_overhead_runs_each_checkout_under_its_own_name(tmp_path):
    """``eval_overhead.py --checkout NAME=PATH``: the hopqa of each checkout answers in turn
    against the same server, its rows named with the checkout's commit; a path without hopqa
    in it is refused before anything runs."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    done = _run("eval_overhead.py", "--limit", "2", "--delay", "0.01", "--methods", "retrieve-then-read",
                "--peers", "", "--checkout", f"a={ROOT}", "--checkout", f"b={ROOT}",
                "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"# hopqa a ({commit}) from: {ROOT / 'hopqa'}" in done.stdout
    rows = json.loads((tmp_path / "f.json").read_text())["rows"]
    assert [(r["harness"], r["workers"], r["calls"]) for r in rows] == [
        (f"hopqa {name} ({commit})", w, 2) for name in "ab" for w in (1, 8)]
    assert all(r["cached_wall"] > 0 for r in rows)
    refused = _run("eval_overhead.py", "--checkout", f"x={tmp_path}", cwd=tmp_path)
    assert refused.returncode != 0 and "PATH a checkout with hopqa/ in it" in refused.stderr


def test_a_preset_run_also_gives_the_preset_without_its_choice_step(monkeypatch, tmp_path):
    """``choice`` acts after everything else a method does: the preset without it is read off the
    preset's own records, each answer as it was before its ``choice`` step (the step's ``answer``
    input), scored again; a question whose choice step did not run keeps its F1. It is labelled
    ``METHOD (small-model, no choice)``, compared with the defaults and Retrieve-then-Read; a run
    without any choice step gives none."""
    presets = _presets_module(monkeypatch)

    def record(qid: str, prediction: str, f1: float, before: str | None) -> dict:
        choice = [{"kind": "choice", "inputs": {"candidates": ["A", "B"], "answer": before}, "children": []}]
        trace = {"kind": "method", "inputs": {}, "children": [{"kind": "infer", "inputs": {}}, *(choice if before else [])]}
        return {"id": qid, "gold": ["Blind Shaft"], "prediction": prediction, "status": "ok", "metrics": {"f1": f1},
                "usage": {"seconds": 5.0}, "trace": trace}

    run = tmp_path / "small-model" / "2wikimultihopqa-dev-distractor" / "hgot"
    run.mkdir(parents=True)
    lines = [record("q0", "Blind Shaft", 1.0, "Li Yang"),          # choice won it
             record("q1", "The Mask", 0.0, "Blind Shaft"),          # choice lost it
             record("q2", "Shaft", 0.6666666666666666, None)]       # no candidates: no choice step
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    by_id = {"q0": 1.0, "q1": 0.0, "q2": 0.6666666666666666}
    table = {"runs": [_stored_run("hgot (small-model)", by_id)], "vs_retrieve_then_read": [], "preset_vs_defaults": []}
    (derived,) = presets.without_last_steps(table, run, "hgot")
    assert derived["label"] == "hgot (small-model, no choice)" and derived["answer_before"] == "choice"
    assert derived["f1_by_id"] == {"q0": 0.0, "q1": 1.0, "q2": 0.6666666666666666}
    assert (derived["n"], derived["median_seconds"], derived["seconds_by_id"]) == (3, None, {})
    assert presets.comparison_name(derived["label"]) == "hgot (no choice)"
    assert presets.preset_labels("hgot (no choice)") == ("hgot (small-model, no choice)", "hgot (defaults)")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "results.jsonl").write_text(json.dumps(record("q0", "Shaft", 0.5, None)) + "\n")
    assert presets.without_last_steps({"runs": [_stored_run("tor (small-model)", {"q0": 0.5})]}, plain, "tor") == []
    # a run with polar on (``--preset-set polar=true``) gives the preset without its polar step too
    yes_no = tmp_path / "polar"
    yes_no.mkdir()
    polar = {"kind": "method", "inputs": {}, "children": [{"kind": "polar", "inputs": {"answer": "Italian"}}]}
    (yes_no / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        {**record("q0", "yes", 1.0, None), "gold": ["yes"], "trace": polar}, record("q1", "The Mask", 0.0, "Blind Shaft"))))
    table = {"runs": [_stored_run("leapquery (small-model, polar=true)", {"q0": 1.0, "q1": 0.0})]}
    no_choice, no_polar = presets.without_last_steps(table, yes_no, "leapquery", "polar=true")
    assert no_polar["label"] == "leapquery (small-model, polar=true, no polar)" and no_polar["answer_before"] == "polar"
    assert no_polar["f1_by_id"] == {"q0": 0.0, "q1": 0.0} and no_choice["f1_by_id"] == {"q0": 1.0, "q1": 1.0}


def test_the_polar_benchmark_picks_train_yes_no_questions_and_reads_the_run_with_and_without_the_step(
        monkeypatch, tmp_path):
    """``benchmarks/polar.py``: the first yes / no questions of each train subset, interleaved,
    with their paragraphs (of the dev subsets with ``--split dev``); a run's F1 with its polar step and without it (each answer before
    the step), paired, with how each step settled and the answers by gold."""
    import importlib.util

    from hopqa.methods.polar import is_polar

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("polar_bench", ROOT / "benchmarks" / "polar.py")
    assert spec is not None and spec.loader is not None
    polar = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(polar)

    rows = polar.questions({"2wikimultihopqa": 3, "hotpotqa": 2})
    assert [r["id"].split("-")[0] for r in rows] == ["2wikimultihopqa", "hotpotqa"] * 2 + ["2wikimultihopqa"]
    assert all(is_polar(r["question"]) and r["paragraphs"] and r["answers"] for r in rows)
    dev = polar.questions({"2wikimultihopqa": 2}, "dev")  # --split dev: the dev subset's, not train's
    assert len(dev) == 2 and all(is_polar(r["question"]) for r in dev)
    assert not {r["question"] for r in dev} & {r["question"] for r in rows}

    def record(qid: str, gold: str, prediction: str, f1: float, before: str | None, how: str) -> dict:
        step = [{"kind": "polar", "inputs": {"answer": before}, "outputs": {"how": how}}] if before else []
        return {"id": qid, "gold": [gold], "prediction": prediction, "status": "ok", "metrics": {"f1": f1},
                "trace": {"kind": "method", "inputs": {}, "children": step}}

    run = tmp_path / "leapquery"
    run.mkdir()
    lines = [record("q0", "no", "yes", 0.0, "Russian", "asked"),   # a value made yes: still wrong
             record("q1", "yes", "yes", 1.0, "Italian", "asked"),  # a value made yes: won
             record("q2", "no", "no", 1.0, "No, never.", "read"),  # read off the answer: won
             record("q3", "2011", "yes", 0.0, "2011", "asked")]    # a garbled question: lost
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    t = polar.summary(run, "leapquery")
    with_step, without = t["runs"]
    assert with_step["label"] == "leapquery (small-model, polar=true)" and with_step["f1"] == 0.5
    assert without["label"] == "leapquery (small-model, no polar)"
    assert without["f1_by_id"] == {"q0": 0.0, "q1": 0.0, "q2": 0.0, "q3": 1.0}  # yes / no gold: scored whole
    w = t["with_vs_without"]
    assert (w["n"], w["wins"], w["ties"], w["losses"]) == (4, 2, 1, 1) and w["diff"] == pytest.approx(0.25)
    assert t["how"] == {"asked": 3, "read": 1}
    assert t["answers"] == {"2011 -> yes": 1, "no -> no": 1, "no -> yes": 1, "yes -> yes": 1}
