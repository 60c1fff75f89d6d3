"""``GET /v1/runs``: the evaluation runs under the service's runs directory, read-only and confined.

A *run of a method* is a directory up to ``MAX_DEPTH`` levels below the runs directory that
holds a ``results.jsonl`` (``hopqa eval --out runs`` writes ``runs/DATASET-SPLIT-SETTING/METHOD/``):
its ``method`` is the directory's name and its ``run`` the path of its parent relative to the
runs directory, ``/``-separated (``""`` for a method directory right in it). ``RunStore``:

- ``runs()``: every run with its summary (``hopqa.evaluation.runner.summarize`` over the
  records, as ``hopqa report`` computes it: ``n``, ``failed``, ``metrics``, ``cost``) and its
  ``state`` (``run_state``: ``complete``, ``running``, or ``interrupted`` — a run killed or
  stopped before it wrote its end marker, whatever its counts say); a run that cannot be read is
  left out, never an error;
- ``records(run, method, ...)``: the summary and the per-question records without their
  traces (``RECORD_FIELDS``), filtered: ``wrong`` (EM 0, or failed), ``failed`` (status not
  ``ok``), ``metric`` with ``below`` / ``above`` (strictly; records without the metric are
  left out), then ``offset`` / ``limit``;
- ``record(run, method, id)``: one record whole, its trace included.

Summaries and trace-less records are cached per file (by size and modification time), so a
listing reads each results file once until it changes; a record with its trace is read from
the file each time. Nothing here writes: a torn last line of a run in progress is skipped,
not cut off.

Confinement: a ``run`` / ``method`` pair is looked up only inside the runs directory. An
absolute path, a ``.`` or ``..`` part, a backslash, or a path that resolves outside the
directory (through a symbolic link, say) is not found (``RunNotFound``, a 404), like a run
that does not exist; the listing does not follow symbolic links to directories. Without a runs
directory every lookup is ``RunNotFound`` saying to start the service with ``--runs``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hopqa.evaluation.runner import read_results, summarize

#: How deep below the runs directory a method directory may be (``runs/a/b/c/METHOD``).
MAX_DEPTH = 4
#: The fields of a record in a listing (the trace and the passages are left out).
RECORD_FIELDS = ("id", "question", "gold", "prediction", "status", "error", "metrics", "usage")
#: Results files whose summaries are kept in memory.
CACHE_SIZE = 64


def run_state(results: Path) -> str:
    """``running`` while a ``hopqa eval`` holds the run's lock (``.lock``, taken with ``flock``:
    the kernel drops it when the process dies), ``complete`` when the run's end marker
    (``summary.json``, written last, after the results are compacted) is there and not older
    than the results, else ``interrupted``: stopped or killed before its end (module docstring)."""
    directory = results.parent
    if _locked(directory / ".lock"):
        return "running"
    try:
        ended = (directory / "summary.json").stat().st_mtime_ns
        return "complete" if ended >= results.stat().st_mtime_ns else "interrupted"
    except OSError:
        return "interrupted"


def _locked(path: Path) -> bool:
    """Whether another process holds an exclusive ``flock`` on ``path`` (never when flock is
    not to be had or the file cannot be opened for reading)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock (Windows)
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class RunNotFound(LookupError):
    """No such run under the runs directory (or no runs directory): a 404."""


@dataclass(frozen=True)
class Filters:
    """Which records of a run to list (module docstring)."""

    wrong: bool = False
    failed: bool = False
    metric: str | None = None
    below: float | None = None
    above: float | None = None

    def keep(self, record: dict[str, Any]) -> bool:
        metrics = record.get("metrics") or {}
        failed = record.get("status") != "ok"
        if self.failed and not failed:
            return False
        if self.wrong and not (failed or _number(metrics.get("em")) in (None, 0.0)):
            return False
        if self.metric is not None and (self.below is not None or self.above is not None):
            value = _number(metrics.get(self.metric))
            if value is None:
                return False
            if self.below is not None and not value < self.below:
                return False
            if self.above is not None and not value > self.above:
                return False
        return True


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


@dataclass
class _Cached:
    stamp: tuple[int, int]
    summary: dict[str, Any]
    records: list[dict[str, Any]]


class RunStore:
    """The runs under ``root`` (module docstring); ``root=None``: no runs directory."""

    def __init__(self, root: Path | None) -> None:
        self.root = Path(root) if root is not None else None
        self._cache: OrderedDict[Path, _Cached] = OrderedDict()
        self._lock = threading.Lock()

    def _base(self) -> Path:
        if self.root is None:
            raise RunNotFound("no runs directory: start the service with --runs DIR (a directory of hopqa eval runs)")
        return self.root.resolve()

    # -- lookups ---------------------------------------------------------------------------
    def locate(self, run: str, method: str) -> Path:
        """The ``results.jsonl`` of ``run`` / ``method``, inside the runs directory, or ``RunNotFound``."""
        base = self._base()
        missing = RunNotFound(f"no run {run + '/' if run else ''}{method} in the runs directory (see GET /v1/runs)")
        parts = run.split("/") if run else []
        if (run.startswith("/") or "\\" in run or "\\" in method or "/" in method or "\0" in run + method
                or any(p in ("", ".", "..") for p in [*parts, method])):
            raise missing
        try:
            path = (base.joinpath(*parts, method) / "results.jsonl").resolve()
        except (OSError, RuntimeError, ValueError):  # a symlink loop, a bad name
            raise missing from None
        if not path.is_relative_to(base) or not path.is_file():
            raise missing
        return path

    def _load(self, path: Path) -> _Cached:
        stat = path.stat()
        stamp = (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            cached = self._cache.get(path)
            if cached is not None and cached.stamp == stamp:
                self._cache.move_to_end(path)
                return cached
        records = list(read_results(path).values())
        summary = summarize(records, path.parent).to_dict()
        light = [{key: r.get(key) for key in RECORD_FIELDS} for r in records]
        cached = _Cached(stamp, summary, light)
        with self._lock:
            self._cache[path] = cached
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return cached

    # -- the endpoints ---------------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        """Every run under the runs directory with its summary; unreadable ones left out."""
        base = self._base()
        found = []
        for directory, dirnames, filenames in os.walk(base, followlinks=False):
            rel = Path(directory).relative_to(base)
            depth = len(rel.parts)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if depth < MAX_DEPTH else []
            if depth == 0 or "results.jsonl" not in filenames:
                continue
            run = rel.parent.as_posix()
            try:
                path = self.locate("" if run == "." else run, rel.name)
                summary = self._load(path).summary
            except (RunNotFound, OSError, ValueError, TypeError, KeyError, AttributeError):
                continue  # unreadable, damaged, or leaving the directory: left out
            found.append({"run": "" if run == "." else run, "method": rel.name, **summary, "state": run_state(path)})
        return found

    def records(self, run: str, method: str, filters: Filters, offset: int = 0, limit: int = 200) -> dict[str, Any]:
        """The summary of a run and its records (without traces) that pass ``filters``."""
        cached = self._read(run, method)
        kept = [r for r in cached.records if filters.keep(r)]
        summary = {**cached.summary, "state": run_state(self.locate(run, method))}
        return {"run": run, "method": method, "summary": summary, "total": len(kept), "offset": offset,
                "limit": limit, "records": kept[offset: offset + limit]}

    def record(self, run: str, method: str, qid: str) -> dict[str, Any]:
        """One record of a run, trace included; ``RunNotFound`` if the run has no such id."""
        path = self.locate(run, method)
        try:
            found = read_results(path).get(qid)
        except (OSError, ValueError) as exc:
            raise RunNotFound(f"the results of {run}/{method} cannot be read: {exc}") from None
        if found is None:
            raise RunNotFound(f"no question {qid!r} in {run + '/' if run else ''}{method}")
        return found

    def _read(self, run: str, method: str) -> _Cached:
        path = self.locate(run, method)
        try:
            return self._load(path)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise RunNotFound(f"the results of {run + '/' if run else ''}{method} cannot be read: {exc}") from None
