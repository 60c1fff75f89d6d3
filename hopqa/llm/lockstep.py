"""``n`` samples of one prompt decoded together, in one batch of sequences sharing its KV cells.

The embedded backend draws ``n`` samples (HGOT's Predict samples, LeapQuery's votes, GenRead's
documents) as ``n`` calls with seeds ``seed, seed+1, ...`` one after another; with
``batch_samples`` > 1 this module draws them together: the prompt is evaluated once (sequence
0, block-aligned as every prompt), its cells are shared with sequences ``1..n``
(``llama_memory_seq_cp``: the cells get more sequence ids, nothing is copied), and each sample runs llama-cpp-python's own, unchanged
completion code — chat template, sampler chain with its own seed, grammar, stop strings,
``max_tokens``, detokenization — in a thread of its own on a *view* of the model: a shallow copy
that shares the model and the context and has its own token history, sampler and sequence.

A view's one-token ``eval`` does not decode: it waits until every live sample has asked for its
next token, and the last one to ask decodes them all in one ``llama_batch`` (ordered by
sequence, so the batch depends only on the request, never on thread timing); each sample then
samples from its own logits row. A sample that ends (a stop string, ``max_tokens``, the end of
the text) leaves the lockstep, and the others go on in smaller batches. The first error or
cancellation ends every sample; the caller re-raises it.

The numbers of a batch of ``k`` tokens are not bit-identical to ``k`` single-token decodes
(llama.cpp's CPU kernels and attention change with the batch and the cache layout), so a sample
drawn here may differ from the same seed drawn alone; it depends only on the request (its
prompt, ``n``, seeds and options), so the same request still gives the same samples whatever ran
before it. ``EmbeddedConfig.batch_samples`` turns this on (``0``, the default, draws every
sample alone; docs/llm-backends.md, "Batched samples": how often the two differ, and the speed, measured).
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Callable
from typing import Any

from hopqa.cancel import check_cancelled


class _Prompt(Exception):
    """Raised by a capturing view's ``generate``: llama-cpp-python's prompt tokens."""

    def __init__(self, tokens: list[int]) -> None:
        super().__init__("prompt captured")
        self.tokens = tokens


def view_of(llama: Any) -> Any:
    """A shallow copy of a ``llama_cpp.Llama`` sharing its model and context (``copy.copy``
    would reload the model through ``Llama.__setstate__``) with an exit stack of its own: a
    view's ``__del__`` must not free what it shares."""
    view = object.__new__(type(llama))
    view.__dict__.update(llama.__dict__)
    view._stack = contextlib.ExitStack()
    view.input_ids = llama.input_ids.copy()
    view._sampler = None
    return view


def prompt_tokens(llama: Any, call: Callable[[Any], Any]) -> list[int]:
    """The tokens llama-cpp-python makes of a request (``call(view)`` runs the completion on a
    view): its chat template and tokenization, without evaluating anything."""

    def capture(tokens: Any, *args: Any, **kwargs: Any) -> Any:
        raise _Prompt(list(tokens))

    view = view_of(llama)
    view.generate = capture
    try:
        call(view)
    except _Prompt as got:
        return got.tokens
    raise RuntimeError("llama-cpp-python completed a request without generating")  # pragma: no cover


class Lockstep:
    """The samples' shared decoding (module docstring): ``step`` for each next token, ``leave``
    when a sample ends."""

    def __init__(self, llama: Any, n: int, cancel: threading.Event | None) -> None:
        from llama_cpp import _internals

        self.llama = llama
        self.cancel = cancel
        self._cond = threading.Condition()
        self._live = set(range(1, n + 1))
        self._pending: dict[int, tuple[int, int]] = {}
        self._rows: dict[int, int] = {}
        self._round = 0
        self.error: BaseException | None = None
        self._batch = _internals.LlamaBatch(n_tokens=n, embd=0, n_seq_max=1, verbose=False)
        #: Held while a sample reads its logits row (``llama_get_logits_ith`` may reorder the
        #: context's outputs in place; ctypes calls release the GIL).
        self.sampling = threading.Lock()
        #: Tokens decoded (every sample's generated tokens but the last of each).
        self.evaluated = 0
        #: Decoding rounds, and the tokens of each (for tests and traces).
        self.batches: list[int] = []

    def close(self) -> None:
        self._batch.close()

    def step(self, seq: int, token: int, pos: int) -> int:
        """Decode ``token`` at ``pos`` of sequence ``seq`` with the other samples' next tokens;
        the row of its logits in the batch."""
        with self._cond:
            if self.error is not None:
                raise self.error
            self._pending[seq] = (token, pos)
            now = self._round
            self._decode_when_all_asked()
            self._cond.wait_for(lambda: self._round != now or self.error is not None)
            if self.error is not None:
                raise self.error
            return self._rows[seq]

    def leave(self, seq: int, error: BaseException | None = None) -> None:
        """Sample ``seq`` ended (with ``error``: every sample ends)."""
        with self._cond:
            self._live.discard(seq)
            if error is not None and self.error is None:
                self.error = error
            if self.error is not None:
                self._cond.notify_all()
                return
            self._decode_when_all_asked()

    def _decode_when_all_asked(self) -> None:
        if not self._pending or set(self._pending) != self._live:
            return
        try:
            check_cancelled(self.cancel)
            batch = self._batch.batch
            order = sorted(self._pending)
            for i, seq in enumerate(order):
                token, pos = self._pending[seq]
                batch.token[i] = token
                batch.pos[i] = pos
                batch.seq_id[i][0] = seq
                batch.n_seq_id[i] = 1
                batch.logits[i] = True
                self._rows[seq] = i
            batch.n_tokens = len(order)
            self.llama._ctx.decode(self._batch)
            self.evaluated += len(order)
            self.batches.append(len(order))
        except BaseException as exc:  # noqa: BLE001 - handed to every sample and to the caller
            self.error = exc
        self._pending.clear()
        self._round += 1
        self._cond.notify_all()


def draw(llama: Any, prompt_len: int, seeds: list[int], call: Callable[[Any, int], Any],
         cancel: threading.Event | None) -> tuple[list[Any], Lockstep]:
    """Run ``call(view, seed)`` for every seed in lockstep; their results in order. The prompt's
    ``prompt_len`` tokens are evaluated on sequence 0 and its logits are the last decoded."""
    n = len(seeds)
    ctx = llama._ctx
    lock = Lockstep(llama, n, cancel)
    results: list[Any] = [None] * n
    threads = []
    try:
        for seq in range(1, n + 1):
            ctx.kv_cache_seq_cp(0, seq, 0, prompt_len)
        for i, seed in enumerate(seeds):
            view = _sample_view(llama, lock, i + 1, prompt_len)
            threads.append(threading.Thread(target=_run, args=(lock, i + 1, view, seed, call, results, i),
                                            name=f"hopqa-sample-{i + 1}", daemon=True))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        import llama_cpp

        for seq in range(1, n + 1):
            llama_cpp.llama_memory_seq_rm(ctx.memory, seq, -1, -1)
        lock.close()
    if lock.error is not None:
        raise lock.error
    return results, lock


def _run(lock: Lockstep, seq: int, view: Any, seed: int, call: Callable[[Any, int], Any], results: list[Any],
         i: int) -> None:
    error: BaseException | None = None
    try:
        results[i] = call(view, seed)
    except BaseException as exc:  # noqa: BLE001 - re-raised by draw (the first error wins)
        error = exc
    finally:
        lock.leave(seq, error)


def _sample_view(llama: Any, lock: Lockstep, seq: int, prompt_len: int) -> Any:
    """A view whose history is the prompt (its logits the last decoded) and whose one-token
    evaluations go through ``lock`` on sequence ``seq``."""
    from llama_cpp import Llama

    view = view_of(llama)
    view.n_tokens = prompt_len
    view._requires_eval = False
    view._row = -1
    view.generate = types.MethodType(Llama.generate, view)

    def eval_tokens(tokens: Any) -> None:
        for token in list(tokens):
            row = lock.step(seq, int(token), view.n_tokens)
            view.input_ids[view.n_tokens] = token
            view.n_tokens += 1
            view._row = row

    def sample(**_: Any) -> int:
        with lock.sampling:
            return view._sampler.sample(view._ctx, view._row)

    view.eval = eval_tokens
    view.sample = sample
    return view
