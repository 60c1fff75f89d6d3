"""Each seed method's paper defaults against its ``small-model`` preset (issue 33), beside
Retrieve-then-Read and IRCoT, on the same questions, with paired intervals.

    .venv/bin/python benchmarks/presets.py [--datasets musique,hotpotqa,2wikimultihopqa]
        [--settings distractor,open] [--limit 30] [--methods hgot,gensco-stop,self-dc,leapquery,tor]
        [--baselines retrieve-then-read,ircot] [--variants defaults,small-model]
        [--llm embedded:qwen2.5-1.5b] [--out runs/bench-presets] [--report-only] [--figures FILE]
        [--merge-into docs/results/presets.json --merge-note TEXT]

Every (setting, dataset, method, variant) is one ``hopqa eval`` run, resumable: re-running
continues where it stopped and never redoes a finished question (run it in the background, one
model process at a time: days of model time on 2 cores for everything; start with one dataset
and setting). ``defaults`` runs go under ``OUT/defaults/``, preset runs under
``OUT/small-model/`` (a method without that preset has no such run), the baselines once under
``OUT/defaults/``. The open setting searches the demo corpus, as ``hopqa ask`` does. Options
every run of a method shares, whatever the variant, are in ``SHARED`` (HGOT's cheap settings:
its paper's take ~10 minutes a question here). The LLM response cache is off, so seconds per
question are real.

Then, per dataset and setting, ``hopqa report`` over both variants of the methods and baselines
asked for (and Retrieve-then-Read's run, when there is one; never other runs in the same
folders) with ``--baseline retrieve-then-read``: every method and variant against Retrieve-then-Read on the questions both
answered (the paired difference, its 95 % interval, p, win / tie / loss), and each preset
against its own defaults (the ``vs defaults`` lines: the paired F1 difference on the shared
questions, paired by id as ``hopqa report`` pairs runs: ``compare_by_id``).

The figures go to ``--figures`` (default ``OUT/figures.json``) with the date, machine, model and
command: per dataset and setting each complete run's F1, its median seconds a question (a
median, so that a run paused for a while still shows its pace) and its comparison with
Retrieve-then-Read, and each preset against its defaults; each run's F1 by question id too
(``f1_by_id``), so that a later run can be paired with it after its records are gone.
``docs/results/presets.json`` gathers them, from which ``benchmarks/doc_tables.py`` renders the
docs' tables: ``--merge-into docs/results/presets.json --merge-note "what ran and why"`` merges a
run's figures into it (``merge_figures``: runs and comparisons replaced by label or added, the
merge recorded under ``about.merged``).

A variant of a preset is measured with ``--preset-set NAME=VALUE`` (repeatable), set over the
preset in its runs: they are labelled ``METHOD (small-model, NAME=VALUE)`` and compared with the
defaults as ``METHOD (NAME=VALUE)``; give it an ``--out`` of its own.

An option of a preset that acts after everything else its method does (``LAST_STEPS``:
``choice``, ``polar``) is also measured off the preset's own run: the run without it, each
answer as it was before that option's trace step, scored again, is stored beside it as ``METHOD
(small-model, no choice)`` and compared with the defaults (and Retrieve-then-Read); its seconds
are not known apart.

A measurement too long for one sitting is made in parts: ``--skip 10 --limit 10`` answers
questions 11 to 20 (``hopqa eval --skip``), and ``--merge-into ... --extend`` joins each run of
that part to the stored run of its label (F1 and seconds by id joined, every comparison paired
again), so that a run whose records are gone still grows to 30 questions.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

# benchmarks/figures.py (the script's folder is on sys.path)
from figures import about, f1_by_question, write_figures

from hopqa.evaluation.report import compare_by_id
from hopqa.evaluation.runner import read_results
from hopqa.evaluation.stats import Comparison

#: Options every run of a method takes, defaults and preset alike (``--set`` values).
SHARED: dict[str, list[str]] = {
    "hgot": ["samples=2", "max_steps=2", "entailment_delta=false"],
}
#: The fields of a comparison with Retrieve-then-Read the figures keep (``hopqa report``'s).
COMPARISON_FIELDS = ("n", "diff", "low", "high", "p_value", "wins", "ties", "losses", "excludes_zero", "significant")
#: The preset compared with the paper's defaults.
PRESET = "small-model"
#: Methods whose preset reads token log-probabilities (Self-DC's ``confidence=prob``): the
#: embedded model is loaded with ``logits_all=1`` for every run of them.
NEEDS_LOGPROBS = {"self-dc"}


def run_dir(out: Path, variant: str, dataset: str, setting: str, method: str) -> Path:
    return out / variant / f"{dataset}-dev-{setting}" / method


def has_preset(method: str) -> bool:
    from hopqa.methods.base import method_presets

    return PRESET in method_presets(method)


def llm_spec(spec: str, method: str) -> str:
    """``spec``, for an embedded model with ``logits_all=1`` when ``method`` needs log-probabilities."""
    if method not in NEEDS_LOGPROBS or not spec.startswith("embedded:") or "logits_all" in spec:
        return spec
    return spec + ("&" if "?" in spec else "?") + "logits_all=1"


def run(args: argparse.Namespace, dataset: str, setting: str, method: str, variant: str) -> None:
    cmd = [sys.executable, "-m", "hopqa.cli", "eval", "--dataset", dataset, "--split", "dev", "--setting", setting,
           "--limit", str(args.limit), "--skip", str(args.skip), "--llm", llm_spec(args.llm, method), "--method", method, "--out", str(Path(args.out) / variant),
           "--no-progress", "--no-cache"]
    if variant != "defaults":
        cmd += ["--preset", variant]
    for item in SHARED.get(method, []) + (args.preset_set if variant == PRESET else []):
        cmd += ["--set", item]
    t0 = time.time()
    label = f"{setting} {dataset} {method} ({variant})"
    print(f"[{time.strftime('%H:%M:%S')}] {label} ...", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    print(f"[{time.strftime('%H:%M:%S')}] {label} done in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


@functools.cache
def records_of(path: Path) -> dict[str, dict]:
    """A run's records by id (none without a results file), read once: the report reads each
    run's F1 and seconds, and its F1 again for the preset comparisons, after the runs ended."""
    return read_results(path / "results.jsonl") if (path / "results.jsonl").is_file() else {}


def f1_by_id(path: Path) -> dict[str, float]:
    return f1_by_question(records_of(path))


def seconds_by_id(path: Path) -> dict[str, float]:
    """A run's seconds per question, by id."""
    return {qid: float((r.get("usage") or {}).get("seconds") or 0.0) for qid, r in records_of(path).items()}


def median_seconds(path: Path) -> float | None:
    """The median of a run's seconds per question (None without records)."""
    import statistics

    seconds = list(seconds_by_id(path).values())
    return statistics.median(seconds) if seconds else None


#: Options of a preset that act last, after everything else the method does, by the kind of the
#: trace step that records them, with the label suffix of the run without them (``choice``: the
#: answer held to a comparison's candidates). The preset without such an option is read off the
#: preset's own run: each answer as it was before that step (the step's ``answer`` input),
#: scored again, so that one run measures the preset with and without it on the same questions
#: (``polar``: a yes / no question's answer held to yes or no; a question has at most one of the
#: two steps, a yes / no question naming no candidates).
LAST_STEPS = {"choice": "no choice", "polar": "no polar"}


def trace_steps(step: dict | None) -> Iterator[dict]:
    """A record's trace step (``Step.to_dict``) and its descendants, depth first."""
    if not step:
        return
    yield step
    for child in step.get("children") or []:
        yield from trace_steps(child)


def f1_before_step(path: Path, kind: str) -> dict[str, float] | None:
    """A run's F1 by id with each answer as it was before its ``kind`` step (``LAST_STEPS``):
    the step's ``answer`` input where a record has one, the record's own F1 where not (the step
    did not run, so the answer is the same); None when no record has that step."""
    from hopqa.evaluation.metrics import token_f1

    f1, seen = {}, False
    for qid, r in records_of(path).items():
        before = next((s.get("inputs", {}).get("answer") for s in trace_steps(r.get("trace")) if s.get("kind") == kind),
                      None)
        if before is None:
            f1[qid] = float(r.get("metrics", {}).get("f1", 0.0))
        else:
            seen = True
            f1[qid] = token_f1(str(before), r.get("gold") or [])
    return f1 if seen else None


def without_last_steps(table: dict, path: Path, method: str, extra: str = "") -> list[dict]:
    """The runs of ``table``'s preset run of ``method`` (at ``path``; ``extra``: its
    ``--preset-set`` options) without each option of ``LAST_STEPS`` it used, read off its
    records (``f1_before_step``), labelled ``METHOD (small-model, no choice)`` (``METHOD
    (small-model, EXTRA, no choice)``): its questions and F1 by id, no seconds (they were not
    measured apart)."""
    label = preset_label(method, extra)
    run = next((r for r in table["runs"] if r["label"] == label), None)
    if run is None:
        return []
    derived = []
    for kind, suffix in LAST_STEPS.items():
        f1 = f1_before_step(path, kind)
        if f1 is None:
            continue
        derived.append({**run, "label": f"{label[:-1]}, {suffix})", "f1": sum(f1.values()) / len(f1),
                        "median_seconds": None, "f1_by_id": f1, "seconds_by_id": {}, "derived_from": label,
                        "answer_before": kind})
    return derived


def preset_label(method: str, extra: str = "") -> str:
    """The label of ``method``'s preset run: ``METHOD (small-model)``, or with the options
    ``--preset-set`` added to it, ``METHOD (small-model, depth=1)``."""
    return f"{method} ({PRESET}, {extra})" if extra else f"{method} ({PRESET})"


def variant_label(method: str, run: Path, extra: str = "") -> str:
    """A run's label in the figures: ``METHOD (VARIANT)`` for a method with a preset (its
    defaults or its preset, with ``extra``: the options ``--preset-set`` added to the preset),
    the method alone for a baseline, whichever runs one report holds (``hopqa report`` labels by
    method alone when they are unambiguous)."""
    if not has_preset(method):
        return method
    return preset_label(method, extra) if PRESET in run.parts else f"{method} (defaults)"


def figures_of(report_json: Path, dataset: str, setting: str, skip: int = 0, extra: str = "") -> dict:
    """One dataset and setting of ``figures.json``: its runs (complete ones) and their F1
    comparisons with Retrieve-then-Read, from ``hopqa report``'s JSON (``extra``: the options
    ``--preset-set`` added to the preset, in its runs' labels)."""
    data = json.loads(report_json.read_text(encoding="utf-8"))
    rows = [r for r in data["rows"] if r["stratum"] == "all"]
    labels = {r["label"]: variant_label(r["method"], Path(r["run"]), extra) for r in rows}
    runs = [{"label": labels[r["label"]], "method": r["method"], "n": r["n"], "asked": r["asked"],
             "partial": r["partial"], "f1": r["metrics"].get("f1"), "median_seconds": median_seconds(Path(r["run"])),
             "f1_by_id": f1_by_id(Path(r["run"])), "seconds_by_id": seconds_by_id(Path(r["run"])), "skip": skip}
            for r in rows]
    comparisons = [{**{k: c[k] for k in COMPARISON_FIELDS}, "method": labels.get(c["method"], c["method"])}
                   for c in data["comparisons"] if c["stratum"] == "all" and c["metric"] == "f1"]
    return {"dataset": dataset, "setting": setting, "runs": runs, "vs_retrieve_then_read": comparisons,
            "preset_vs_defaults": []}


def report(args: argparse.Namespace, datasets: list[str], settings: list[str], methods: list[str]) -> Path:
    out = Path(args.out)
    tables: list[dict] = []
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; LLM {args.llm}; "
          f"dev, first {args.limit} questions; LLM response cache off; shared options {SHARED}")
    for setting in settings:
        for dataset in datasets:
            # the runs of the methods asked for (and of the baselines), never other runs lying in
            # the same folders: a report of one method merged into the figures replaces its rows only
            names = dict.fromkeys([*_names(args.baselines), "retrieve-then-read", *methods])
            dirs = [d for v in ("defaults", PRESET) for m in names
                    if (d := run_dir(out, v, dataset, setting, m)).is_dir()]
            if not dirs:
                continue
            print(f"\n## {dataset}, {setting} setting\n", flush=True)
            # without a Retrieve-then-Read run (``--baselines ""``) the report compares nothing with it
            baseline = (["--baseline", "retrieve-then-read"]
                        if run_dir(out, "defaults", dataset, setting, "retrieve-then-read").is_dir() else [])
            cmd = [sys.executable, "-m", "hopqa.cli", "report", *map(str, dirs), *baseline,
                   "--metrics", "em,f1,support_recall", "--no-plots", "--out", str(out / f"report-{dataset}-{setting}")]
            subprocess.run(cmd, check=True)
            extra = ", ".join(args.preset_set)
            table = figures_of(out / f"report-{dataset}-{setting}" / "report.json", dataset, setting, args.skip, extra)
            tables.append(table)
            for method in methods:
                base = f1_by_id(run_dir(out, "defaults", dataset, setting, method))
                tuned = f1_by_id(run_dir(out, PRESET, dataset, setting, method))
                derived = without_last_steps(table, run_dir(out, PRESET, dataset, setting, method), method, extra)
                table["runs"] += derived
                rtr = next((r for r in table["runs"] if r["label"] == "retrieve-then-read"), None)
                if rtr is not None:
                    table["vs_retrieve_then_read"] += [_paired(compare_by_id(d["f1_by_id"], rtr["f1_by_id"]), d["label"])
                                                       for d in derived]
                pairs = [(f"{method} ({extra})" if extra else method, tuned, base)]
                for d in derived:  # the preset without an option acting last: against its defaults and the preset
                    pairs.append((comparison_name(d["label"]), d["f1_by_id"], base))
                    c = compare_by_id(tuned, d["f1_by_id"])
                    print(f"{method} {PRESET} vs {d['label']}, F1 on {c.n} questions: {c.diff:+.3f} "
                          f"[{c.low:+.3f}, {c.high:+.3f}], p = {c.p_value:.3g}, {c.wins} / {c.ties} / {c.losses}")
                for name, a, b in pairs:
                    c = compare_by_id(a, b)  # as ``hopqa report`` pairs runs
                    if not c.n:
                        continue
                    print(f"{name} {PRESET} vs defaults, F1 on {c.n} shared questions: {c.diff:+.3f} "
                          f"[{c.low:+.3f}, {c.high:+.3f}], p = {c.p_value:.3g}, {c.wins} / {c.ties} / {c.losses}")
                    table["preset_vs_defaults"].append({"method": name, "n": c.n, "diff": c.diff, "low": c.low,
                                                        "high": c.high, "p_value": c.p_value, "wins": c.wins,
                                                        "ties": c.ties, "losses": c.losses})
    target = write_figures(args.figures or out / "figures.json",
                           about(llm=args.llm, limit=args.limit, shared_options=SHARED, response_cache="off"),
                           tables=tables)
    print(f"figures: {target}", file=sys.stderr)
    return target


def _names(text: str) -> list[str]:
    """The names of a comma-separated option (``--methods``, ``--baselines``), blanks left out."""
    return [m.strip() for m in text.split(",") if m.strip()]


def preset_labels(name: str) -> tuple[str, str]:
    """The run labels a preset-against-defaults comparison named ``name`` pairs: ``tor`` pairs
    ``tor (small-model)`` with ``tor (defaults)``; ``tor (reader=short)`` pairs
    ``tor (small-model, reader=short)`` with ``tor (defaults)``."""
    method, _, variant = name.partition(" (")
    variant = variant.removesuffix(")")
    return (f"{method} ({PRESET}, {variant})" if variant else f"{method} ({PRESET})"), f"{method} (defaults)"


def comparison_name(label: str) -> str | None:
    """The preset-against-defaults comparison a run labelled ``label`` takes part in as the
    preset (``preset_labels``' inverse): ``tor (small-model)`` is ``tor``,
    ``tor (small-model, reader=short)`` is ``tor (reader=short)``; None for any other run."""
    method, _, variant = label.partition(" (")
    variant = variant.removesuffix(")")
    if variant == PRESET:
        return method
    if variant.startswith(f"{PRESET}, "):
        return f"{method} ({variant.removeprefix(f'{PRESET}, ')})"
    return None


def _paired(c: Comparison, label: str) -> dict:
    """A comparison as the figures keep it (``hopqa report``'s fields)."""
    return {**{k: getattr(c, k) for k in COMPARISON_FIELDS}, "method": label}


def merge_figures(new: dict, into: Path, what: str, extend: bool = False) -> list[str]:
    """Merge the figures ``new`` (this script's) into the figures file ``into``, table by dataset
    and setting: a run replaces the run of the same label or is added, as do its comparisons;
    a replaced run's old comparison with Retrieve-then-Read goes with it (one the new figures
    do not bring is computed again), and a run with F1 by id and no comparison with
    Retrieve-then-Read (a run merged before Retrieve-then-Read's F1 by id was kept, a run
    merged from a report without it) is paired with it as ``hopqa report`` pairs runs. A preset
    against its defaults whose preset or defaults run was replaced (a defaults run grown from 20
    to 30 questions while the preset's run is no longer on disk) is paired again from their F1
    by id, unless ``new`` brings that comparison; one never made (the defaults of a preset
    whose run is no longer on disk, measured later) is made from them.
    With ``extend``, ``new`` holds parts of runs already stored (their next questions, measured
    with ``--skip`` after the first part's records were gone): a stored run of the same label is
    joined with its part (``extended_run``) instead of replaced, and every comparison of a run
    extended is paired again from the joined F1 by id (the part's own comparisons, on its
    questions alone, are left out). A run read off the preset's (``no choice``) grows with it
    where a part had no question with that step (``derived_parts``). A Retrieve-then-Read run
    replaced or extended takes every comparison with it: each is paired again.
    ``about.merged`` records the date, machine and command of ``new`` with ``what`` (what was
    run and why). Written atomically; the lines describing each change are returned."""
    old = json.loads(into.read_text(encoding="utf-8"))
    log: list[str] = []
    for table in new["tables"]:
        key = (table["dataset"], table["setting"])
        cur = next((t for t in old["tables"] if (t["dataset"], t["setting"]) == key), None)
        if cur is None:
            old["tables"].append(table)
            log.append(f"added the table {key[0]}, {key[1]}")
            continue
        if extend:
            table = {**table, "runs": table["runs"] + derived_parts(cur["runs"], table["runs"])}
            cur["runs"] += derived_parts(table["runs"], cur["runs"])  # its earlier parts, none with the step
        replaced = {r["label"] for r in table["runs"]}  # their old comparisons went with their old F1
        cur["vs_retrieve_then_read"] = [c for c in cur["vs_retrieve_then_read"]
                                        if c["method"] not in replaced and "retrieve-then-read" not in replaced]
        if extend:  # a part's comparisons are on its questions alone: all are paired again below
            table = {**table, "vs_retrieve_then_read": [], "preset_vs_defaults": []}
        for field, name in (("runs", "label"), ("vs_retrieve_then_read", "method"), ("preset_vs_defaults", "method")):
            where = {item[name]: i for i, item in enumerate(cur[field])}
            for item in table[field]:
                verb = "replaced" if item[name] in where else "added"
                if item[name] in where and extend and field == "runs":
                    i = where[item[name]]
                    item = cur[field][i] = extended_run(cur[field][i], item)
                    verb = "extended"
                elif item[name] in where:
                    cur[field][where[item[name]]] = item
                else:
                    cur[field].append(item)
                figure = (f"F1 {item['f1']:.3f}" if field == "runs" else
                          f"{item['diff']:+.3f} [{item['low']:+.3f}, {item['high']:+.3f}]")
                log.append(f"{verb} {key[0]}, {key[1]}: {field} {item[name]} (n {item['n']}, {figure})")
        brought = {c["method"] for c in table["preset_vs_defaults"]}
        runs = {r["label"]: r for r in cur["runs"]}
        compared = {c["method"] for c in cur["preset_vs_defaults"]}
        for label in sorted(runs):  # a preset and its defaults both stored, one of them new, never compared
            name = comparison_name(label)
            pair = preset_labels(name) if name is not None else ()
            if (name is not None and name not in compared and set(pair) & replaced
                    and all("f1_by_id" in runs.get(run, {}) for run in pair)):
                cur["preset_vs_defaults"].append({"method": name})  # paired below
        for i, item in enumerate(cur["preset_vs_defaults"]):
            tuned, base = (runs.get(label) for label in preset_labels(item["method"]))
            if (item["method"] in brought or tuned is None or base is None or not {tuned["label"], base["label"]} & replaced
                    or "f1_by_id" not in tuned or "f1_by_id" not in base):
                continue
            c = compare_by_id(tuned["f1_by_id"], base["f1_by_id"])
            cur["preset_vs_defaults"][i] = _paired(c, item["method"])
            log.append(f"paired {key[0]}, {key[1]}: {tuned['label']} against {base['label']} on {c.n} "
                       f"{c.diff:+.3f} [{c.low:+.3f}, {c.high:+.3f}]")
    for table in old["tables"]:
        base = next((r for r in table["runs"] if r["label"] == "retrieve-then-read"), None)
        if base is None or "f1_by_id" not in base:
            continue
        have = {c["method"] for c in table["vs_retrieve_then_read"]}
        for r in table["runs"]:
            if r["label"] in have or r is base or "f1_by_id" not in r:
                continue
            c = compare_by_id(r["f1_by_id"], base["f1_by_id"])
            table["vs_retrieve_then_read"].append(_paired(c, r["label"]))
            log.append(f"paired {table['dataset']}, {table['setting']}: {r['label']} against retrieve-then-read "
                       f"{c.diff:+.3f} [{c.low:+.3f}, {c.high:+.3f}]")
    a = new["about"]
    old["about"].setdefault("merged", []).append({"date": a["date"], "command": a["command"],
                                                  "machine": a["machine"], "what": what})
    about_old = old.pop("about")
    write_figures(into, about_old, **old)
    return log


def derived_parts(stored: list[dict], part: list[dict]) -> list[dict]:
    """With ``--extend``: for each run of ``stored`` read off another (``derived_from``: the
    preset without its ``choice`` step) that ``part`` lacks because none of its questions had
    that step, ``part``'s run of that other label under the derived run's label: its answers
    (and F1) as they are, no seconds (``without_last_steps``). Called both ways: a part's
    figures without the derived run get it from the part's preset run, and a derived run first
    brought by a later part gets the stored preset run's earlier questions."""
    brought = {r["label"]: r for r in part}
    return [{**brought[run["derived_from"]], "label": run["label"], "derived_from": run["derived_from"],
             "answer_before": run.get("answer_before"), "median_seconds": None, "seconds_by_id": {}}
            for run in stored
            if run.get("derived_from") in brought and run["label"] not in brought]


def extended_run(stored: dict, part: dict) -> dict:
    """The run ``stored`` joined with ``part``, its next questions measured apart (``--skip``):
    F1 and seconds by id joined (a question in both keeps the part's), the questions asked the
    union of the two ranges of the dataset they were asked (``skip`` to ``skip + asked``; a run
    stopped early and continued from its last answer asks some twice), F1 their mean, the
    median seconds over the questions whose seconds are known (``median_seconds_n`` says how
    many when some are not: runs stored before their seconds by id were kept). ``ValueError``
    when either has no F1 by id, they are different methods, or questions between them were
    asked of neither, or when more questions were answered than the two ranges hold (a part merged
    with ``--report-only`` without the ``--skip`` it was measured with)."""
    import statistics

    if "f1_by_id" not in stored or "f1_by_id" not in part:
        raise ValueError(f"cannot extend {stored['label']}: no F1 by id in the stored run or in its part")
    if stored["method"] != part["method"]:
        raise ValueError(f"cannot extend {stored['label']} ({stored['method']}) with a run of {part['method']}")
    f1 = {**stored["f1_by_id"], **part["f1_by_id"]}
    seconds = {q: t for q, t in {**stored.get("seconds_by_id", {}), **part.get("seconds_by_id", {})}.items()
               if q in f1}
    # the questions each was asked: a range of the dataset's, from its skip (0 for runs stored before)
    (start, end), (later, last) = sorted((r.get("skip", 0), r.get("skip", 0) + r["asked"]) for r in (stored, part))
    if later > end:
        raise ValueError(f"cannot extend {stored['label']}: questions {end + 1} to {later} were asked of neither")
    asked = max(end, last) - start
    if len(f1) > asked:  # the part's questions lie outside the range it says it was asked
        raise ValueError(f"cannot extend {stored['label']}: {len(f1)} questions answered in a range of {asked}: "
                         "give the part's --skip (the --skip it was measured with) with --report-only")
    run = {**stored, "n": len(f1), "asked": asked, "partial": len(f1) < asked,
           "f1": sum(f1.values()) / len(f1), "median_seconds": statistics.median(seconds.values()) if seconds else None,
           "f1_by_id": f1, "seconds_by_id": seconds, "skip": min(stored.get("skip", 0), part.get("skip", 0))}
    run.pop("median_seconds_n", None)
    if seconds and len(seconds) < len(f1):
        run["median_seconds_n"] = len(seconds)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="musique,hotpotqa,2wikimultihopqa")
    ap.add_argument("--settings", default="distractor,open")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--skip", type=int, default=0,
                    help="leave out the first S questions (hopqa eval --skip): a part of a longer measurement, "
                         "joined to the runs measured before with --merge-into ... --extend")
    ap.add_argument("--methods", default="hgot,gensco-stop,self-dc,leapquery,tor")
    ap.add_argument("--baselines", default="retrieve-then-read,ircot")
    ap.add_argument("--variants", default=f"defaults,{PRESET}",
                    help="which runs of each method: its defaults, its preset or both (baselines run with defaults)")
    ap.add_argument("--preset-set", action="append", default=[], metavar="NAME=VALUE",
                    help="an option set over the preset in its runs (repeatable; hopqa eval --set), a variant of the "
                         "preset: its runs are labelled 'METHOD (small-model, NAME=VALUE)' (give it its own --out)")
    ap.add_argument("--llm", default="embedded:qwen2.5-1.5b")
    ap.add_argument("--out", default="runs/bench-presets")
    ap.add_argument("--report-only", action="store_true", help="print the tables of what has run")
    ap.add_argument("--figures", help="where the figures go as JSON (default OUT/figures.json)")
    ap.add_argument("--merge-into", metavar="FILE",
                    help="then merge them into this figures file (docs/results/presets.json): runs and comparisons "
                         "replaced by label or added, the merge recorded in its about.merged")
    ap.add_argument("--merge-note", default="", help="what was run and why, for about.merged (with --merge-into)")
    ap.add_argument("--extend", action="store_true",
                    help="with --merge-into: a stored run of the same label is extended by these runs' questions "
                         "(a part measured with --skip), not replaced; its comparisons are paired again")
    args = ap.parse_args()
    datasets, settings, methods = _names(args.datasets), _names(args.settings), _names(args.methods)
    baselines = _names(args.baselines)
    variants = {v for v in args.variants.split(",") if v}
    if unknown := variants - {"defaults", PRESET}:
        ap.error(f"unknown variants: {', '.join(sorted(unknown))} (defaults, {PRESET})")
    if not args.report_only:
        for setting in settings:
            for dataset in datasets:
                for method in baselines:
                    run(args, dataset, setting, method, "defaults")
                for method in methods:
                    if "defaults" in variants:
                        run(args, dataset, setting, method, "defaults")
                    if PRESET in variants and has_preset(method):
                        run(args, dataset, setting, method, PRESET)
    figures = report(args, datasets, settings, methods)
    if args.merge_into:
        new = json.loads(figures.read_text(encoding="utf-8"))
        for line in merge_figures(new, Path(args.merge_into), args.merge_note or new["about"]["command"],
                                  extend=args.extend):
            print(line)
    print(json.dumps({"finished": time.strftime("%Y-%m-%d %H:%M:%S")}))


if __name__ == "__main__":
    main()
