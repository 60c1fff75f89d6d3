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
run completes, the file is compacted: rewritten with one line per id — the newest good line, at
the position of the id's first line — and bad lines are dropped. The rewrite streams into a
temporary file that replaces ``results.jsonl`` atomically, so a kill during compaction leaves
the old log or the compact file, never a mix. Anything reading a completed run line by line
therefore counts every question once. (Reading, repairing, appending and compacting are
``hopqa.jsonl``'s, shared with HGOT's bootstrap.)

Bad lines: a line that is not a record (``check_record``: not JSON, nested too deeply, no
``status``, fields of the wrong type) is skipped with a warning naming
``file:line``; the id it held counts as not answered, so the next run answers it again.

Threads: the workers answer the questions; this thread scores each answer and writes its line
(a worker scores only with a judge or BERTScore, whose model calls would hold this thread up),
so a worker is already on its next question meanwhile.

Streams and stops: the examples are read as the run goes (a list or a stream), at most two per
worker ahead of the records written. On Ctrl-C (``RunInterrupted``) or a record that cannot be
written (``RunWriteError``: a full disk — the line is undone, the lines before stay), no new
question starts, the ones in flight are cancelled at their next model or retrieval call
(``hopqa.runtime.cancellable``) and not recorded, and the error says how to resume.

``run_dir/config.json`` records what was run; it is written atomically, a resumed run with a
different configuration is refused rather than mixed, and a damaged one (unreadable, not a JSON
object) is refused with what to do. ``run_dir/summary.json`` holds the aggregate metrics and
cost, rewritten atomically at the end; ``run_dir/questions.json`` the number of questions the
run was asked (at the start when it is known, and at the end), so that a report marks a run
with fewer records as partial. One run at a time writes a run directory: ``evaluate``
holds a lock on ``run_dir/.lock`` (released when the process ends, even by ``kill -9``).

Settings: ``distractor`` — each question retrieves only from its own candidate paragraphs
(``CandidatePool``); ``open`` — one retriever over the pooled corpus for every question.
"""

from __future__ import annotations

import errno
import json
import signal
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sized
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hopqa import jsonl
from hopqa.config import write_atomic
from hopqa.console import progress_bar
from hopqa.evaluation.metrics import judge_accuracy, load_metrics, score_answer
from hopqa.methods.base import Method, RetrievingMethod, method_config
from hopqa.retrieval.pool import CandidatePool, UnboundPool
from hopqa.runtime import cancellable
from hopqa.trace import (
    PARSE_DIRECT,
    PARSE_FALLBACK,
    PARSE_STATUSES,
    parse_counts,
    submit,
)
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
_TEXT_FIELDS = ("prediction", "question", "dataset", "split", "setting", "method")
_NUMBERS = (int, float)


def _numbers(value: Any, what: str) -> str | None:
    """Why ``value`` is not a mapping of names to numbers (None when it is)."""
    if not isinstance(value, dict):
        return f"{what} is not an object"
    for key, number in value.items():
        if isinstance(number, bool) or not isinstance(number, _NUMBERS):
            return f"{what}[{key!r}] is not a number"
    return None


def check_record(rec: dict[str, Any]) -> str | None:
    """Why a line of ``results.jsonl`` cannot be used (wrong or missing fields), None when it
    can: ``status`` "ok" or "failed" is required (a line ``{"id": X}`` alone records nothing),
    and the fields readers compute with have their types when present."""
    if rec.get("status") not in ("ok", "failed"):
        return "its status is not 'ok' or 'failed'"
    for name in _TEXT_FIELDS:
        if name in rec and not isinstance(rec[name], str):
            return f"its {name} is not text"
    for name in ("metrics", "usage", "parse"):
        if rec.get(name) is not None and (why := _numbers(rec[name], name)):
            return f"its {why}"
    words = rec.get("question_words")
    if words is not None and (isinstance(words, bool) or not isinstance(words, int)):
        return "its question_words is not a whole number"
    for name, kind in (("gold", list), ("passages", list), ("trace", dict)):
        if rec.get(name) is not None and not isinstance(rec[name], kind):
            return f"its {name} is not a {'list' if kind is list else 'JSON object'}"
    if any(not isinstance(p, dict) for p in rec.get("passages") or ()):
        return "a passage is not a JSON object"
    return None


def read_results(path: Path, repair: bool = False) -> dict[str, dict[str, Any]]:
    """Records by id (the newest good line of an id wins). A line that is not a record
    (``check_record``) is skipped with a ``hopqa.jsonl.RecordWarning`` naming ``file:line``;
    with ``repair``, a torn last line (a kill mid-write) is cut off the file."""
    return jsonl.read(path, key="id", repair=repair, check=check_record)


def compact_results(path: Path) -> dict[str, dict[str, Any]]:
    """Rewrite ``path`` atomically with one line per id, the newest good one, at the position of
    the id's first line (bad lines dropped); return the records by id. A file that is already
    compact is left untouched. Call it only when no run is appending to the file."""
    jsonl.compact(path, key="id", check=check_record)
    return read_results(path)


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
        "fields": example_fields(example),
        "parse": parse_counts(trace := answer.trace.to_dict() if answer.trace is not None else None),
        "trace": trace,
    }


#: Longest text of an example's field kept in its record (``example_fields``).
FIELD_CHARS = 200


def example_fields(example: Example) -> dict[str, Any]:
    """The example's dataset fields a report can split by (``hopqa report --by``): its extras
    that are a number, a truth value or a text of at most ``FIELD_CHARS`` characters
    (HotpotQA's ``type`` and ``level``, 2WikiMultihopQA's ``type``, a question file's own)."""
    return {key: value for key, value in example.extras.items()
            if isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= FIELD_CHARS)}


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
    examples: Iterable[Example],
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
    total: int | None = None,
) -> RunSummary:
    """Answer and score every example into ``run_dir`` (see the module docstring).

    ``examples`` may be a list or a stream (``hopqa.datasets.iter_dataset``): it is read as the
    run goes, at most ``2 * workers`` questions ahead of the answers written, so a file of a
    million questions starts at once in bounded memory (``total``: its length, for the progress
    bar, when it is not a list).

    In the ``open`` setting a retrieving method searches its own retriever (the pooled corpus);
    in the ``distractor`` setting each question's paragraphs replace it. Raises ``ValueError``
    for a bad argument (setting, workers, no retriever for the open setting), a
    ``RunDirectoryError`` when ``run_dir`` holds another configuration, a damaged
    ``config.json``, is being written by another run or cannot be used, ``RunWriteError`` when
    a record cannot be written (a full disk: the run stops, every record written before stays),
    and ``RunInterrupted`` (a ``KeyboardInterrupt``) on Ctrl-C: no new question starts, the
    ones in flight are cancelled at their next model or retrieval call, and every record
    finished before is on disk."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; use one of {', '.join(SETTINGS)}")
    if setting == "open" and isinstance(method, RetrievingMethod) and isinstance(method.retriever.inner, UnboundPool):
        raise ValueError("the open setting needs a method built with a retriever over the pooled corpus")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a whole number of at least 1, not {workers!r}")
    out = Path(run_dir)
    _prepare(out)
    results_path = out / "results.jsonl"
    with _run_lock(out):
        try:
            _check_config(out / "config.json", config or {}, write=True)
        except OSError as exc:
            raise RunWriteError(_cannot_write(out / "config.json", exc, "before any question was answered")) from exc
        if total is None and isinstance(examples, Sized):
            total = len(examples)
        if total is not None:
            _write_asked(out, total)
        wanted = _run(method, examples, results_path, setting, workers, judge, retry_failed, support_k,
                      progress, on_record, bertscore, total)
        _write_asked(out, len(wanted))
        try:  # the run completed: one line per id from now on
            found = jsonl.compact(results_path, key="id", check=check_record, keep=_status)
        except OSError as exc:  # a full disk: the log stays as it is, whole, and is read as one
            warnings.warn(f"{results_path} was not compacted to one line per question ({_oserror(exc)}); it is "
                          "complete as it is, newest line of a question last", RuntimeWarning, stacklevel=2)
            found = jsonl.scan(results_path, key="id", check=check_record, keep=_status, warn=False)
        summary = summarize(jsonl.records_at(results_path, found.spans, wanted), out)
        try:
            write_atomic(out / "summary.json", json.dumps(summary.to_dict(), indent=1))
        except OSError as exc:
            raise RunWriteError(_cannot_write(out / "summary.json", exc, "every question is recorded in "
                                              f"{results_path}; hopqa report reads them")) from exc
    return summary


def _write_asked(run_dir: Path, asked: int) -> None:
    """Record how many questions the run was asked (``questions.json``), for reports to mark a
    run with fewer answers as partial; a failed write loses only that mark."""
    try:
        write_atomic(run_dir / "questions.json", json.dumps({"asked": asked}))
    except OSError as exc:
        warnings.warn(f"cannot write {run_dir / 'questions.json'} ({_oserror(exc)}): reports will not know whether "
                      "this run is complete", RuntimeWarning, stacklevel=3)


def read_asked(run_dir: Path) -> int | None:
    """The number of questions the run in ``run_dir`` was asked, or ``None`` when it did not
    record it (runs made before hopqa did, or an unreadable ``questions.json``)."""
    try:
        asked = jsonl.loads((run_dir / "questions.json").read_text(encoding="utf-8")).get("asked")
    except (OSError, ValueError, AttributeError):
        return None
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked >= 0 else None


class RunWriteError(RuntimeError):
    """A run's file could not be written (a full disk): the run stopped; what was written stays."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run: ``recorded`` questions were written this time, into ``path``."""

    def __init__(self, path: Path, recorded: int, cancelled: int) -> None:
        super().__init__(f"interrupted: {recorded} questions recorded this time in {path} ({cancelled} in flight "
                         "not recorded); run the same command again to resume")
        self.path, self.recorded, self.cancelled = path, recorded, cancelled


def _oserror(exc: OSError) -> str:
    """An ``OSError`` in words, a full disk named as such."""
    if exc.errno == errno.ENOSPC:
        return "the disk is full"
    return exc.strerror or str(exc)


def _cannot_write(path: Path, exc: OSError, what: str) -> str:
    return f"cannot write {path}: {_oserror(exc)}; {what}"


def _status(rec: dict[str, Any]) -> str:
    return str(rec["status"])


def _prepare(out: Path) -> None:
    """Make the run directory; ``RunDirectoryError`` when it, or one of its files, is not what
    a run needs (a file where the directory should be, a directory where a file should be)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirectoryError(f"cannot use {out} as a run directory: {_oserror(exc)}") from exc
    for name in ("results.jsonl", "config.json", "summary.json", "questions.json", ".lock"):
        if (out / name).is_dir():
            raise RunDirectoryError(f"{out / name} is a directory, not the run's file: remove it, or use another "
                                    "--out directory")


def _run(method: Method, examples: Iterable[Example], results_path: Path, setting: str, workers: int,
         judge: Any | None, retry_failed: bool, support_k: int | None, progress: bool,
         on_record: Callable[[dict[str, Any]], None] | None, bertscore: Any | None = None,
         total: int | None = None) -> set[str]:
    """Answer the examples not answered yet (and the failed ones with ``retry_failed``),
    appending each record to ``results_path`` as soon as it is scored; the ids of ``examples``.
    At most ``2 * workers`` questions are taken ahead of the records written."""
    found = jsonl.scan(results_path, key="id", check=check_record, keep=_status)
    jsonl.truncate_torn(results_path, found)
    previous = found.records  # id -> status
    del found
    try:
        writer = jsonl.Appender(results_path)  # one line per question, durably
    except OSError as exc:
        raise RunWriteError(_cannot_write(results_path, exc, "nothing was answered")) from exc
    counts = {"done": 0, "failed": 0}
    cost = Usage()
    bar = progress_bar(total, method.name, enabled=progress, unit="q", dynamic_ncols=True)
    wanted: set[str] = set()
    stream = iter(examples)
    stop = threading.Event()
    pending: dict[Future[dict[str, Any] | Answer | None], Example] = {}
    load_metrics()  # before the workers start: none of them waits on the import (metrics.load_metrics)
    pool = ThreadPoolExecutor(max_workers=workers)

    # Scoring an answer is pure computation (EM, F1, ROUGE-L, ...: ~1 ms); without a judge or
    # BERTScore (model calls) it is done on this thread, in ``write``, so that a worker goes on to
    # its next question's LLM calls meanwhile (with one worker, the scoring no longer adds to
    # each question's time).
    score_here = judge is None and bertscore is None

    def one(ex: Example) -> dict[str, Any] | Answer | None:
        ans = _answer(method, ex, setting)
        if ans.cancelled:
            return None
        return ans if score_here else _record(ex, ans, setting, judge, support_k, bertscore)

    def take() -> None:
        """Submit questions until ``2 * workers`` are in flight or the stream ends."""
        skipped = 0
        while len(pending) < 2 * workers and not stop.is_set():
            ex = next(stream, None)
            if ex is None:
                break
            wanted.add(ex.id)
            status = previous.get(ex.id)
            if status is not None and not (retry_failed and status == "failed"):
                skipped += 1
                continue
            pending[submit(pool, one, ex)] = ex
        if skipped:
            bar.update(skipped)

    def write(fut: Future[dict[str, Any] | Answer | None], ex: Example) -> None:
        """Record one finished question (not a cancelled one), scoring it first if its worker did not."""
        try:
            rec = fut.result()
            if isinstance(rec, Answer):
                rec = _record(ex, rec, setting, judge, support_k, bertscore)
        except Exception as exc:  # scoring itself failed: still recorded
            rec = _failed_record(ex, method.name, setting, exc)
        if rec is None:  # cancelled: not an answer
            pending.pop(fut, None)
            return
        writer.write(rec)
        pending.pop(fut, None)
        counts["done"] += 1
        counts["failed"] += rec["status"] == "failed"
        cost.add(Usage.from_dict(rec["usage"]))
        bar.update(1)
        bar.set_postfix(failed=counts["failed"], calls=cost.llm_calls,
                        tokens=cost.prompt_tokens + cost.completion_tokens, refresh=False)
        if on_record is not None:
            on_record(rec)

    def finished() -> list[tuple[Future[dict[str, Any] | Answer | None], Example]]:
        """The finished questions still pending; ``write`` takes each off ``pending`` once its
        line is written, so a Ctrl-C before that leaves it to the handler below (one the
        interrupt found already written but not yet synced is written twice; the newest wins)."""
        return [(fut, ex) for fut, ex in pending.items() if fut.done()]

    def interrupted(exc: BaseException) -> RunInterrupted:
        stop.set()
        for fut, ex in finished():  # answers that finished meanwhile are kept too
            try:
                write(fut, ex)
            except Exception:  # noqa: S112 - a record that cannot be written now is answered next time
                continue
        return RunInterrupted(results_path.parent, counts["done"], len(pending))

    sigint = threading.Event()
    try:
        with cancellable(stop), _sigint_seen(sigint):
            take()
            while pending:
                wait(pending, return_when=FIRST_COMPLETED)
                for fut, ex in finished():
                    write(fut, ex)
                take()
    except KeyboardInterrupt as exc:
        raise interrupted(exc) from exc
    except jsonl.AppendError as exc:
        stop.set()
        raise RunWriteError(_cannot_write(results_path, exc, f"the run stopped; the {counts['done']} questions "
                                          "recorded before stay intact: free space and run the same command again "
                                          "to resume")) from exc
    except BaseException as exc:
        if sigint.is_set():  # a Ctrl-C that another exception replaced on its way up: still a Ctrl-C
            raise interrupted(exc) from exc
        stop.set()
        raise
    finally:
        # Stopped: the questions not started are dropped, those in flight end at their next call.
        pool.shutdown(wait=not stop.is_set(), cancel_futures=True)
        writer.close()
        bar.close()
    return wanted


@contextmanager
def _sigint_seen(seen: threading.Event) -> Iterator[None]:
    """Set ``seen`` when SIGINT (Ctrl-C) arrives during the block, the signal otherwise handled
    as before (Python's handler raises ``KeyboardInterrupt``). On the main thread only, and only
    where Python's own handler or another callable one is installed: elsewhere (a service's
    worker thread, SIGINT ignored or left to the system) it is never set.

    The evaluation loop takes its interrupt path (answers kept, ``RunInterrupted``, exit 130)
    whenever it is set, even when the ``KeyboardInterrupt`` was replaced on its way up by
    another exception: a library's ``finally`` that fails because the interrupt cut its own
    set-up short (tqdm's first ``write`` creating its lock did: an ``AttributeError``)."""
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if not callable(previous):
        yield
        return

    def handler(signum: int, frame: Any) -> Any:
        seen.set()
        return previous(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir/.lock`` for the block (POSIX ``flock``; the kernel
    drops it when the process dies), so that two runs never append to and compact one file."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock (Windows): unguarded
        yield
        return
    try:
        f = open(run_dir / ".lock", "a")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise RunDirectoryError(f"cannot create the lock file {run_dir / '.lock'}: {_oserror(exc)}") from exc
    with f:
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
    find out before loading a model. ``RunDirectoryError`` when a run file is a directory."""
    if Path(run_dir).is_dir():
        _prepare(Path(run_dir))
    _check_config(Path(run_dir) / "config.json", config, write=False)


def _check_config(path: Path, config: dict[str, Any], write: bool) -> None:
    """Compare ``config`` with the recorded one; record it (atomically) if there is none yet."""
    if not path.exists():
        if write:
            write_atomic(path, json.dumps(config, indent=1, default=str))
        return
    old = _read_config(path)
    if config and (diff := config_differences(old, config)):
        raise RunConfigMismatch(
            f"{path.parent} holds a run with a different configuration (differs in: {', '.join(diff)}); "
            "use another --out directory, or delete it to start over"
        )


def config_differences(old: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The keys in which the recorded configuration ``old`` and ``config`` differ (none: the run
    can continue under ``config``).

    A method option that ``config`` has and ``old`` has not is no difference when its value is
    the method's default (``hopqa.methods.method_config(config["method"])``): the run was
    recorded by an earlier hopqa whose method did not have that option yet, and a new option's
    default keeps the method as it ran (hopqa adds options that way: a default that changed
    would show as a recorded value that differs). An option recorded in ``old`` that ``config``
    has not, or a new one set to another value, is a difference."""
    new = _canonical(config)
    diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if diff == ["options"] and isinstance(old["options"], dict) and isinstance(new.get("options"), dict):
        added = set(new["options"]) - set(old["options"])
        kept = all(k in new["options"] and new["options"][k] == v for k, v in old["options"].items())
        if kept and (defaults := _option_defaults(new.get("method"))) is not None and all(
                k in defaults and new["options"][k] == defaults[k] for k in added):
            return []
    return diff


def _option_defaults(method: Any) -> dict[str, Any] | None:
    """The options of the method registered as ``method`` at their defaults, as JSON reads them
    back (None when there is no such method)."""
    if not isinstance(method, str):
        return None
    try:
        return _canonical(asdict(method_config(method)))
    except ValueError:  # MethodError: no such method
        return None


def _read_config(path: Path) -> dict[str, Any]:
    """The recorded configuration; ``RunConfigDamaged`` if it is not a readable JSON object."""
    try:
        old = jsonl.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        problem = "it is empty" if not path.stat().st_size else f"it is not valid JSON ({exc})"
    except OSError as exc:
        problem = f"it cannot be read ({_oserror(exc)})"
    else:
        if isinstance(old, dict):
            return old
        problem = f"it holds a JSON {type(old).__name__}, not an object"
    raise RunConfigDamaged(
        f"{path} is damaged ({problem}): delete it to continue the run in {path.parent} under the current "
        "configuration, or use another --out directory"
    )


def parse_rates(records: Iterable[dict[str, Any]]) -> dict[str, float]:
    """``parse_rate`` (the share of structured outputs read as asked: ``direct``) and
    ``parse_fallback_rate`` (read by a forgiving rule), pooled over every structured output of
    the records (``hopqa.trace``'s parse records; a line without ``parse`` is counted from its
    trace); empty when no output was structured (a method without structured steps)."""
    totals = dict.fromkeys(PARSE_STATUSES, 0)
    for r in records:
        _add_parse(totals, r)
    return _parse_rates(totals)


def record_parse_counts(record: dict[str, Any]) -> dict[str, int]:
    """How the structured outputs of one recorded question were read, by parse status."""
    counts = record.get("parse") or parse_counts(record.get("trace"))
    return {key: int(counts.get(key, 0)) for key in PARSE_STATUSES}


def _add_parse(totals: dict[str, int], record: dict[str, Any]) -> None:
    for key, count in record_parse_counts(record).items():
        totals[key] += count


def _parse_rates(totals: dict[str, int]) -> dict[str, float]:
    n = sum(totals.values())
    if not n:
        return {}
    return {"parse_rate": totals[PARSE_DIRECT] / n, "parse_fallback_rate": totals[PARSE_FALLBACK] / n}


#: The cost figures that are a mean per question: (summary key, ``Usage`` field).
PER_QUESTION_USAGE = (("llm_calls_per_q", "llm_calls"), ("prompt_tokens_per_q", "prompt_tokens"),
                      ("prompt_tokens_evaluated_per_q", "prompt_tokens_evaluated"),
                      ("completion_tokens_per_q", "completion_tokens"),
                      ("retrieval_calls_per_q", "retrieval_calls"), ("seconds_per_q", "seconds"))

#: Metrics a failed question scores 0 on (the others are averaged over the questions that have them).
ANSWER_METRICS = frozenset({"em", "f1", "precision", "recall", "label_acc", "acc"})


def summarize(records: Iterable[dict[str, Any]], path: Path) -> RunSummary:
    """Mean of every metric over all records (failed ones score 0 on answer metrics), and cost;
    one pass, one record at a time (``records`` may be a stream)."""
    n = failed = 0
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    parsed = dict.fromkeys(PARSE_STATUSES, 0)
    usage = Usage()
    for r in records:
        n += 1
        failed += r.get("status") == "failed"
        for key, value in (r.get("metrics") or {}).items():
            sums[key] = sums.get(key, 0.0) + float(value)
            counts[key] = counts.get(key, 0) + 1
        _add_parse(parsed, r)
        usage.add(Usage.from_dict(r.get("usage") or {}))
    metrics = {k: sums[k] / (n if k in ANSWER_METRICS else counts[k]) for k in sorted(counts)}
    metrics.update(_parse_rates(parsed))
    per = max(1, n)
    cost = {key: getattr(usage, field) / per for key, field in PER_QUESTION_USAGE}
    cost.update({
        "cache_hit_rate": usage.cache_hits / usage.llm_calls if usage.llm_calls else 0.0,
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "prompt_tokens_evaluated": usage.prompt_tokens_evaluated,
        "completion_tokens": usage.completion_tokens,
    })
    if "docs_reviewed" in metrics and cost["llm_calls_per_q"]:
        # Tree of Reviews' "Rate" (Table 5): distinct paragraphs reviewed per LLM call, of the means
        metrics["docs_per_call"] = metrics["docs_reviewed"] / cost["llm_calls_per_q"]
    return RunSummary(n=n, done=n, failed=failed, metrics=metrics, cost=cost, path=path)
