"""The evaluation runner: many questions, in parallel, one JSON line each, resumable.

``evaluate(method, examples, run_dir, ...)`` answers every example and appends one JSON line
per question to ``run_dir/results.jsonl`` as soon as it finishes (prediction, gold, metrics,
usage, passages, ``parse`` — how its structured outputs parsed, ``hopqa.trace.parse_counts``
— the full trace; ``status`` "ok" or "failed" with the error). Each line is written
with one ``write`` and flushed to disk (``fsync``), so a run killed at any moment — even with
``kill -9`` — loses at most the questions in flight. Re-running skips every id already in the
file (``retry_failed=True`` re-runs the failed ones), after cutting off a torn last line if
the kill landed mid-write.

One line per id: while a run is going, the file is an append-only log, so a retried id has
two lines (the newest wins for every reader here: ``read_results``, ``hopqa report``). When a
run completes, the file is compacted: rewritten with one line per id — the newest line, at the
position of the id's first line — and lines that do not parse are dropped. The rewrite goes to
a temporary file that replaces ``results.jsonl`` atomically (``config.write_atomic``), so a
kill during compaction leaves the old log or the compact file, never a mix. Anything reading
a completed run line by line therefore counts every question once. (Reading, repairing,
appending and compacting are ``hopqa.jsonl``'s, shared with HGOT's bootstrap.)

``run_dir/config.json`` records what was run; it is written atomically, a resumed run with a
different configuration is refused rather than mixed, and a damaged one (unreadable, not a JSON
object) is refused with what to do. ``run_dir/summary.json`` holds the aggregate metrics and
cost, rewritten atomically at the end. One run at a time writes a run directory: ``evaluate``
holds a lock on ``run_dir/.lock`` (released when the process ends, even by ``kill -9``).

Settings: ``distractor`` — each question retrieves only from its own candidate paragraphs
(``CandidatePool``); ``open`` — one retriever over the pooled corpus for every question.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hopqa import jsonl
from hopqa.config import write_atomic
from hopqa.console import progress_bar
from hopqa.evaluation.metrics import judge_accuracy, score_answer
from hopqa.methods.base import Method, RetrievingMethod
from hopqa.retrieval.pool import CandidatePool, UnboundPool
from hopqa.trace import PARSE_DIRECT, PARSE_FALLBACK, PARSE_STATUSES, parse_counts, submit
from hopqa.types import Answer, Example, Usage

SETTINGS = ("distractor", "open")


class RunDirectoryError(RuntimeError):
    """The run directory cannot be used as asked (the message says why and what to do)."""


class RunConfigMismatch(RunDirectoryError):
    """A resumed run was asked to continue with a different configuration."""


class RunConfigDamaged(RunDirectoryError):
    """``config.json`` of a run directory cannot be read (e.g. written by a version of hopqa
    that was killed mid-write)."""


class RunDirectoryBusy(RunDirectoryError):
    """Another run (another process, or another ``evaluate`` call) is writing the directory."""


@dataclass
class RunSummary:
    """What ``evaluate`` returns (also written to summary.json)."""

    n: int
    done: int
    failed: int
    metrics: dict[str, float]
    cost: dict[str, float]
    path: Path

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "done": self.done, "failed": self.failed, "metrics": self.metrics, "cost": self.cost}


# -- the results file (``hopqa.jsonl``: durable appends, torn last line, atomic compaction) -------
def read_results(path: Path, repair: bool = False) -> dict[str, dict[str, Any]]:
    """Records by id (the last line of an id wins). With ``repair``, a torn or malformed last
    line (a kill mid-write) is cut off the file."""
    return jsonl.read(path, key="id", repair=repair)


def compact_results(path: Path) -> dict[str, dict[str, Any]]:
    """Rewrite ``path`` atomically with one line per id, the newest, at the position of the id's
    first line (lines that do not parse are dropped); return the records by id. A file that is
    already compact is left untouched. Call it only when no run is appending to the file."""
    return jsonl.compact(path, key="id")


# -- one question -------------------------------------------------------------------------------
def _record(example: Example, answer: Answer, setting: str, judge: Any | None, support_k: int | None,
            bertscore: Any | None = None) -> dict[str, Any]:
    """The line of one answered question: the answer scored (and judged, with a judge; and its
    BERTScore, with a ``hopqa.evaluation.metrics.BertScore``)."""
    metrics = score_answer(answer.answer, example.answers, answer.passages, example.supporting,
                           dataset=example.dataset, support_k=support_k,
                           gold_titles=example.extras.get("supporting_titles") or ())
    metrics.update(answer.metrics)  # the method's own figures (Tree of Reviews' #Doc, #Evidence)
    if bertscore is not None and example.dataset != "fever":
        metrics["bertscore"] = bertscore.score(answer.answer, example.answers)
    judge_reply = None
    if judge is not None and not answer.error:
        try:
            metrics["acc"], judge_reply = judge_accuracy(judge, example.question, answer.answer, example.answers)
        except Exception as exc:  # a judge failure must not lose the answer
            judge_reply = f"judge failed: {type(exc).__name__}: {exc}"
    elif judge is not None:
        metrics["acc"] = 0.0
    return _fields(example, answer, setting, metrics, judge_reply)


def _failed_record(example: Example, method: str, setting: str, exc: Exception) -> dict[str, Any]:
    """The line of a question whose scoring itself failed: no answer, no metrics, no trace."""
    answer = Answer(question=example.question, answer="", method=method, error=f"{type(exc).__name__}: {exc}")
    return _fields(example, answer, setting, metrics={}, judge_reply=None)


def _fields(example: Example, answer: Answer, setting: str, metrics: dict[str, float],
            judge_reply: str | None) -> dict[str, Any]:
    """The one place that knows the fields of a line of ``results.jsonl``."""
    return {
        "id": example.id,
        "dataset": example.dataset,
        "split": example.split,
        "setting": setting,
        "method": answer.method,
        "question": example.question,
        "gold": example.answers,
        "prediction": answer.answer,
        "status": "failed" if answer.error else "ok",
        "error": answer.error,
        "metrics": metrics,
        "judge": judge_reply,
        "usage": answer.usage.to_dict(),
        "passages": [{"id": p.id, "title": p.title, "score": p.score} for p in answer.passages],
        "question_words": len(example.question.split()),
        "parse": parse_counts(trace := answer.trace.to_dict() if answer.trace is not None else None),
        "trace": trace,
    }


def _answer(method: Method, example: Example, setting: str) -> Answer:
    if setting == "distractor" and isinstance(method, RetrievingMethod):
        if not example.paragraphs:
            return Answer(question=example.question, answer="", method=method.name,
                          error=f"{example.dataset} has no candidate paragraphs: use the open setting")
        return method.with_retriever(CandidatePool(example.paragraphs)).answer(example.question)
    return method.answer(example.question)


# -- the run ------------------------------------------------------------------------------------
def evaluate(
    method: Method,
    examples: Sequence[Example],
    run_dir: str | Path,
    setting: str = "distractor",
    workers: int = 1,
    judge: Any | None = None,
    config: dict[str, Any] | None = None,
    retry_failed: bool = False,
    support_k: int | None = None,
    progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    bertscore: Any | None = None,
) -> RunSummary:
    """Answer and score every example into ``run_dir`` (see the module docstring).

    In the ``open`` setting a retrieving method searches its own retriever (the pooled corpus);
    in the ``distractor`` setting each question's paragraphs replace it. Raises ``ValueError``
    for a bad argument (setting, workers, no retriever for the open setting) and a
    ``RunDirectoryError`` when ``run_dir`` holds another configuration, a damaged
    ``config.json``, or is being written by another run."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; use one of {', '.join(SETTINGS)}")
    if setting == "open" and isinstance(method, RetrievingMethod) and isinstance(method.retriever.inner, UnboundPool):
        raise ValueError("the open setting needs a method built with a retriever over the pooled corpus")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a whole number of at least 1, not {workers!r}")
    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    with _run_lock(out):
        _check_config(out / "config.json", config or {}, write=True)
        results_path = out / "results.jsonl"
        _run(method, examples, results_path, setting, workers, judge, retry_failed, support_k,
             progress, on_record, bertscore)
        records = compact_results(results_path)  # the run completed: one line per id from now on
        wanted = {ex.id for ex in examples}
        summary = summarize([r for i, r in records.items() if i in wanted], out)
        write_atomic(out / "summary.json", json.dumps(summary.to_dict(), indent=1))
    return summary


def _run(method: Method, examples: Sequence[Example], results_path: Path, setting: str, workers: int, judge: Any | None, retry_failed: bool,
         support_k: int | None, progress: bool, on_record: Callable[[dict[str, Any]], None] | None,
         bertscore: Any | None = None) -> None:
    """Answer the examples not answered yet (and the failed ones with ``retry_failed``),
    appending each record to ``results_path`` as soon as it is scored."""
    previous = read_results(results_path, repair=True)
    todo = [ex for ex in examples
            if ex.id not in previous or (retry_failed and previous[ex.id].get("status") == "failed")]
    writer = jsonl.Appender(results_path)  # one line per question, durably, from many threads
    counts = {"done": 0, "failed": 0}
    cost = Usage()
    bar = progress_bar(len(examples), method.name, enabled=progress, initial=len(examples) - len(todo), unit="q",
                       dynamic_ncols=True)

    def one(ex: Example) -> dict[str, Any]:
        ans = _answer(method, ex, setting)
        return _record(ex, ans, setting, judge, support_k, bertscore)

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {submit(pool, one, ex): ex for ex in todo}
            for fut in as_completed(futures):
                ex = futures[fut]
                try:
                    rec = fut.result()
                except Exception as exc:  # scoring itself failed: still recorded
                    rec = _failed_record(ex, method.name, setting, exc)
                writer.write(rec)
                if on_record is not None:
                    on_record(rec)
                counts["done"] += 1
                counts["failed"] += rec["status"] == "failed"
                cost.add(Usage.from_dict(rec["usage"]))
                bar.update(1)
                bar.set_postfix(failed=counts["failed"], calls=cost.llm_calls,
                                tokens=cost.prompt_tokens + cost.completion_tokens, refresh=False)
    finally:
        writer.close()
        bar.close()


@contextmanager
def _run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir/.lock`` for the block (POSIX ``flock``; the kernel
    drops it when the process dies), so that two runs never append to and compact one file."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock (Windows): unguarded
        yield
        return
    with open(run_dir / ".lock", "a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RunDirectoryBusy(f"another run is writing {run_dir}: wait for it to finish, or use another "
                                   "--out directory") from exc
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _canonical(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, other objects strings)."""
    return json.loads(json.dumps(value, default=str))


def check_config(run_dir: str | Path, config: dict[str, Any]) -> None:
    """Raise ``RunConfigMismatch`` / ``RunConfigDamaged`` if ``run_dir`` holds a run that
    ``evaluate`` with ``config`` would refuse to continue (nothing is written): lets a caller
    find out before loading a model."""
    _check_config(Path(run_dir) / "config.json", config, write=False)


def _check_config(path: Path, config: dict[str, Any], write: bool) -> None:
    """Compare ``config`` with the recorded one; record it (atomically) if there is none yet."""
    if not path.is_file():
        if write:
            write_atomic(path, json.dumps(config, indent=1, default=str))
        return
    old = _read_config(path)
    if config and old != _canonical(config):
        diff = sorted(k for k in set(old) | set(config) if old.get(k) != _canonical(config.get(k)))
        raise RunConfigMismatch(
            f"{path.parent} holds a run with a different configuration (differs in: {', '.join(diff)}); "
            "use another --out directory, or delete it to start over"
        )


def _read_config(path: Path) -> dict[str, Any]:
    """The recorded configuration; ``RunConfigDamaged`` if it is not a readable JSON object."""
    try:
        old = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problem = "it is empty" if not path.stat().st_size else f"it is not valid JSON ({exc})"
    else:
        if isinstance(old, dict):
            return old
        problem = f"it holds a JSON {type(old).__name__}, not an object"
    raise RunConfigDamaged(
        f"{path} is damaged ({problem}): delete it to continue the run in {path.parent} under the current "
        "configuration, or use another --out directory"
    )


def parse_rates(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """``parse_rate`` (the share of structured outputs read as asked: ``direct``) and
    ``parse_fallback_rate`` (read by a forgiving rule), pooled over every structured output of
    the records (``hopqa.trace``'s parse records; a line without ``parse`` is counted from its
    trace); empty when no output was structured (a method without structured steps)."""
    totals = dict.fromkeys(PARSE_STATUSES, 0)
    for r in records:
        counts = r.get("parse") or parse_counts(r.get("trace"))
        for key in totals:
            totals[key] += int(counts.get(key, 0))
    n = sum(totals.values())
    if not n:
        return {}
    return {"parse_rate": totals[PARSE_DIRECT] / n, "parse_fallback_rate": totals[PARSE_FALLBACK] / n}


def summarize(records: Sequence[dict[str, Any]], path: Path) -> RunSummary:
    """Mean of every metric over all records (failed ones score 0 on answer metrics), and cost."""
    n = len(records)
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    answer_metrics = {"em", "f1", "precision", "recall", "label_acc", "acc"}
    present = {k for r in records for k in (r.get("metrics") or {})}
    for r in records:
        m = r.get("metrics") or {}
        for key in present:
            if key in m:
                sums[key] = sums.get(key, 0.0) + float(m[key])
                counts[key] = counts.get(key, 0) + 1
            elif key in answer_metrics:
                counts[key] = counts.get(key, 0) + 1
    metrics = {k: sums.get(k, 0.0) / counts[k] for k in sorted(counts)}
    metrics.update(parse_rates(records))
    usage = Usage()
    for r in records:
        usage.add(Usage.from_dict(r.get("usage") or {}))
    per = max(1, n)
    cost = {
        "llm_calls_per_q": usage.llm_calls / per,
        "prompt_tokens_per_q": usage.prompt_tokens / per,
        "completion_tokens_per_q": usage.completion_tokens / per,
        "retrieval_calls_per_q": usage.retrieval_calls / per,
        "seconds_per_q": usage.seconds / per,
        "cache_hit_rate": usage.cache_hits / usage.llm_calls if usage.llm_calls else 0.0,
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
    }
    if "docs_reviewed" in metrics and cost["llm_calls_per_q"]:
        # Tree of Reviews' "Rate" (Table 5): distinct paragraphs reviewed per LLM call, of the means
        metrics["docs_per_call"] = metrics["docs_reviewed"] / cost["llm_calls_per_q"]
    failed = sum(r.get("status") == "failed" for r in records)
    return RunSummary(n=n, done=n, failed=failed, metrics=metrics, cost=cost, path=path)
