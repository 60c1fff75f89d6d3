"""A persistent response cache in front of any backend: a re-run costs no model call.

Keyed by the model's identity plus the full request (prompt or messages, n, temperature,
top_p, max_tokens, stop, logprobs, seed) — see ``hopqa.llm.base.request_key``. Stored with
``diskcache`` (SQLite underneath), which is safe under concurrent processes. A
cached result comes back with ``cached=True``; usage accounting then counts the call as a
cache hit with zero tokens. Sampling at temperature > 0 is cached too (per seed), which makes
evaluations reproducible; pass a different ``seed`` or ``--no-cache`` for fresh samples.
Failed calls are not cached. A hit is made valid Unicode and cut to the reply cap like a fresh
reply (``hopqa.llm.base.cap_generation``), so entries written by older versions obey both.

The cache never fails a call: it is a saving, not a store of results. When it cannot be written
(a full disk, a read-only directory, an I/O error, a lock that never came free), the answer is
returned all the same, writes stop for the rest of the run, and one warning names the cache
and the cause: ``the response cache at PATH cannot be written (disk full): answering without
caching``. An entry that cannot be read (a damaged database or file) counts as a miss, with one
warning the same way; the fresh answer then replaces it if the cache can be written.

Two connections, whatever the threads: ``diskcache`` opens a SQLite connection per calling
thread and closes it only when the garbage collector finds it, so a service that answers each
request on a new thread piled up open files (two per thread: the database and its write-ahead
log) and memory until it hit the process's file limit. A ``ResponseCache`` therefore keeps two
connections per cache and process, however many threads call it, both closed by ``close()``:

- **Writes** (and every other operation of the store: opening it, counting, clearing) run on the
  cache's own worker thread (``_run``), over ``diskcache``'s connection. A write is queued and
  the caller goes on (it waits for the database lock on the worker, like any SQLite write, and a
  failure stops the writes as above); ``close()`` waits for what is queued.
- **Reads** run on the calling thread, over one read connection that the threads share under a
  lock: the statement ``diskcache``'s own ``get`` runs (its fast path: hopqa's caches keep no
  statistics and evict least-recently-stored, so a read writes nothing), then its ``Disk.fetch``.
  A read takes ~30 µs; handing it to the worker and back cost every LLM call 0.5–0.7 ms of two
  thread wake-ups in an evaluation (issue 32). A read of a key whose write is still queued goes
  to the worker instead, after that write, so a read always sees the writes before it. What a
  read raises becomes a miss with one warning, as above; a value whose file went between the
  statement and the fetch (evicted meanwhile) is a miss without one, as in ``diskcache``.

A process forked from one that used the cache starts a worker and opens a read connection of
its own; a thread still working while the interpreter exits (when pools take no new work) uses
the store directly.
"""

from __future__ import annotations

import atexit
import errno
import os
import pickle
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import diskcache

from hopqa.llm.base import (
    Generation,
    GenerationRequest,
    LLMBase,
    LLMWrapper,
    LogLikelihood,
    cap_generation,
    mend_loglikelihood,
    request_key,
)

T = TypeVar("T")

#: What may go wrong in the store underneath (SQLite, the files of large values, the lock).
STORE_ERRORS = (sqlite3.Error, OSError, diskcache.Timeout)
#: What reading an entry may raise besides: a damaged pickle, an entry of another shape.
ENTRY_ERRORS = (pickle.UnpicklingError, EOFError, TypeError, KeyError, ValueError, AttributeError)
#: ``diskcache.Cache.get``'s statement (diskcache 5), less the columns hopqa does not read.
_SELECT = ("SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = ?"
           " AND (expire_time IS NULL OR expire_time > ?)")


def store_problem(exc: BaseException) -> str:
    """A few words on why the store failed: ``disk full``, ``read-only``, ... or the error."""
    text = str(exc).lower()
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT) or "full" in text:
        return "disk full"
    if code == errno.EROFS or "readonly" in text or "read-only" in text:
        return "read-only"
    if code in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if isinstance(exc, diskcache.Timeout):
        return "the database stayed locked"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class ResponseCache:
    """A directory of cached responses (thread- and process-safe) that never fails a call (see
    the module docstring): ``get`` answers None and ``set`` does nothing when the store fails.
    Writes run on the cache's one worker thread, reads on the caller's over one shared read
    connection (module docstring)."""

    def __init__(self, directory: str | Path, size_limit_gb: float = 4.0) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        #: Writes stopped after a failure (module docstring).
        self.writable = True
        self._db: diskcache.Cache | None = None
        #: The worker thread (made on first use) and the process it belongs to (module docstring).
        self._worker: ThreadPoolExecutor | None = None
        self._worker_pid = 0
        #: The read connection, the process it belongs to, and the lock its users take turns by.
        self._reader: sqlite3.Connection | None = None
        self._reader_pid = 0
        self._read_lock = threading.Lock()
        #: Keys with a write still queued (how many), read on the worker after it (module docstring).
        self._queued: dict[str, int] = {}
        _OPEN.add(self)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._db = self._run(diskcache.Cache, str(self.directory), size_limit=int(size_limit_gb * 2**30),
                                 timeout=60)
        except STORE_ERRORS as exc:  # a cache that cannot even be opened: answer without one
            self.writable = False
            self._warn("opened", exc, "answering without caching")

    def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` run on the cache's worker thread (so that the store keeps one
        connection, module docstring); its result, or what it raised, here."""
        future = self._submit(fn, *args, **kwargs)
        return future.result() if isinstance(future, Future) else future

    def _submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T] | T:
        """``fn`` queued on the worker thread (its ``Future``), or, while the interpreter exits
        (pools take no new work), run here (its result)."""
        with self._lock:
            if self._worker is None or self._worker_pid != os.getpid():  # first use, after close, or forked
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hopqa-cache")
                self._worker_pid = os.getpid()
            worker = self._worker
        try:
            return worker.submit(fn, *args, **kwargs)
        except RuntimeError:
            return fn(*args, **kwargs)

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry under ``key``, or None (also when it cannot be read: one warning). Read on
        the calling thread, or on the worker after a write of ``key`` still queued."""
        db = self._db
        if db is None:
            return None
        try:
            if key in self._queued:
                return self._run(lambda: db.get(key))
            return self._lookup(db, key)
        except (*STORE_ERRORS, *ENTRY_ERRORS) as exc:
            self._warn("read", exc, "answering without it")
            return None

    def _lookup(self, db: diskcache.Cache, key: str) -> Any:
        """``db.get(key)`` on this thread, over the shared read connection: ``diskcache``'s
        statement (its fast path) and its ``Disk.fetch``; None for a missing or expired key."""
        db_key, raw = db.disk.put(key)
        with self._read_lock:
            if self._reader is None or self._reader_pid != os.getpid():  # first read, after close, or forked
                self._reader = sqlite3.connect(os.path.join(db.directory, diskcache.core.DBNAME), timeout=60,
                                               isolation_level=None, check_same_thread=False)
                self._reader_pid = os.getpid()
            rows = self._reader.execute(_SELECT, (db_key, raw, time.time())).fetchall()
        if not rows:
            return None
        ((mode, filename, value),) = rows
        try:
            return db.disk.fetch(mode, filename, value, False)
        except FileNotFoundError:  # its file went after the statement (evicted meanwhile): a miss, as in diskcache
            return None

    def set(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key`` unless writes stopped; a failure stops them (one warning).
        The caller does not wait for the write: it is queued on the worker thread, before any
        later operation (so a ``get`` that follows sees it), and ``close`` waits for it."""
        db = self._db
        if not self.writable or db is None:
            return

        def write() -> None:
            try:
                if self.writable:
                    db.set(key, value)
            except STORE_ERRORS as exc:
                self.writable = False
                self._warn("written", exc, "answering without caching")
            finally:
                with self._lock:
                    if self._queued.get(key, 0) > 1:
                        self._queued[key] -= 1
                    else:
                        self._queued.pop(key, None)

        with self._lock:
            self._queued[key] = self._queued.get(key, 0) + 1
        self._submit(write)

    def load(self, key: str, make: Callable[[dict[str, Any]], T]) -> T | None:
        """``make(entry)`` of the entry under ``key``, or None when there is none or it cannot be
        read or made (an entry of another shape: one warning, as for ``get``)."""
        entry = self.get(key)
        if entry is None:
            return None
        try:
            return make(entry)
        except ENTRY_ERRORS as exc:
            self._warn("read", exc, "answering without it")
            return None

    def _warn(self, what: str, exc: BaseException, outcome: str) -> None:
        with self._lock:
            if what in self._warned:
                return
            self._warned.add(what)
        warnings.warn(f"the response cache at {self.directory} cannot be {what} ({store_problem(exc)}): {outcome}",
                      UserWarning, stacklevel=4)

    def __len__(self) -> int:
        db = self._db
        return self._run(lambda: len(db)) if db is not None else 0

    def clear(self) -> None:
        db = self._db
        if db is not None:
            self._run(db.clear)

    def close(self) -> None:
        """Close the connections and end the worker thread (a later call opens them again)."""
        db = self._db
        with self._read_lock:
            reader, self._reader = self._reader, None
            if reader is not None and self._reader_pid == os.getpid():
                reader.close()
        with self._lock:
            worker, self._worker = self._worker, None
            if worker is None or self._worker_pid != os.getpid():
                return
        if db is not None:
            try:
                worker.submit(db.close).result()
            except RuntimeError:  # the interpreter is exiting: its worker has stopped already
                db.close()
        worker.shutdown(wait=True)


#: The caches of this process, closed at its exit so that their queued writes are kept.
_OPEN: weakref.WeakSet[ResponseCache] = weakref.WeakSet()


@atexit.register
def close_all() -> None:
    """Close every cache of the process (their queued writes done first): at exit, also when
    ``hopqa``'s executable ends without tearing the interpreter down (``cli.run``)."""
    for cache in list(_OPEN):
        try:
            cache.close()
        except Exception:  # noqa: BLE001, S110 - one cache must not keep the others' writes from the store
            pass


class CachedLLM(LLMWrapper):
    """Wraps a backend; answers repeated requests from the cache."""

    def __init__(self, inner: LLMBase, cache: ResponseCache) -> None:
        super().__init__(inner)
        self.cache = cache

    def complete(self, request: GenerationRequest) -> Generation:
        key = request_key(self.inner.identity(), "generate", request.key_dict())
        t0 = time.perf_counter()
        gen = self.cache.load(key, Generation.from_dict)
        if gen is not None:
            gen.cached = True
            gen.seconds = time.perf_counter() - t0
            return cap_generation(gen, request.max_tokens)
        gen = self.inner.complete(request)
        self.cache.set(key, gen.to_dict())
        return gen

    def loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        self.require("loglikelihood")
        key = request_key(self.inner.identity(), "loglikelihood", {"context": context, "continuation": continuation})
        ll = self.cache.load(key, LogLikelihood.from_dict)
        if ll is not None:
            ll.cached = True
            return mend_loglikelihood(ll, self.name)
        ll = self.inner.loglikelihood(context, continuation)
        self.cache.set(key, ll.to_dict())
        return ll

    def loglikelihoods(self, context: str, continuations: Sequence[str]) -> list[LogLikelihood]:
        """Each continuation from the cache where it is there (the same key as ``loglikelihood``'s),
        the others scored together by the backend."""
        self.require("loglikelihood")
        keys = [request_key(self.inner.identity(), "loglikelihood", {"context": context, "continuation": c})
                for c in continuations]
        found: list[LogLikelihood | None] = []
        for key in keys:
            ll = self.cache.load(key, LogLikelihood.from_dict)
            if ll is not None:
                ll.cached = True
                ll = mend_loglikelihood(ll, self.name)
            found.append(ll)
        missing = [i for i, ll in enumerate(found) if ll is None]
        if missing:
            for i, ll in zip(missing, self.inner.loglikelihoods(context, [continuations[i] for i in missing])):
                self.cache.set(keys[i], ll.to_dict())
                found[i] = ll
        return [ll for ll in found if ll is not None]

    def close(self) -> None:
        self.inner.close()
        self.cache.close()
