"""Samples of one request decoded together (issue 31, ``hopqa.llm.lockstep``): the lockstep's own
rules with a recording context, then on the real SmolLM2 — what equals what, and what is counted."""

from __future__ import annotations

import json
import threading

import pytest

from hopqa.cancel import Cancelled, cancellable
from hopqa.llm.lockstep import Lockstep


# -- the lockstep's rules, with a context that records its batches --------------------------------
class _Ctx:
    def __init__(self, fail_at: int | None = None) -> None:
        self.batches: list[list[tuple[int, int, int]]] = []
        self.fail_at = fail_at

    def decode(self, batch) -> None:
        b = batch.batch
        if self.fail_at is not None and len(self.batches) == self.fail_at:
            raise RuntimeError("llama_decode returned 1")
        self.batches.append([(b.seq_id[i][0], b.token[i], b.pos[i]) for i in range(b.n_tokens)])


class _Llama:
    def __init__(self, ctx: _Ctx) -> None:
        self._ctx = ctx


def _walk(lock: Lockstep, seq: int, tokens: int, rows: dict[int, list[int]], errors: dict[int, BaseException]):
    try:
        for k in range(tokens):
            rows.setdefault(seq, []).append(lock.step(seq, 100 * seq + k, 10 + k))
    except BaseException as exc:  # noqa: BLE001
        errors[seq] = exc
        lock.leave(seq, exc)
        return
    lock.leave(seq)


def _run(lengths: list[int], ctx: _Ctx, cancel: threading.Event | None = None):
    lock = Lockstep(_Llama(ctx), len(lengths), cancel)
    rows: dict[int, list[int]] = {}
    errors: dict[int, BaseException] = {}
    threads = [threading.Thread(target=_walk, args=(lock, i + 1, n, rows, errors)) for i, n in enumerate(lengths)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    lock.close()
    return lock, rows, errors


def test_every_live_sample_is_in_each_batch_ordered_by_sequence():
    ctx = _Ctx()
    lock, rows, errors = _run([3, 1, 2], ctx)
    assert not errors and lock.error is None
    assert ctx.batches == [
        [(1, 100, 10), (2, 200, 10), (3, 300, 10)],  # all three, by sequence
        [(1, 101, 11), (3, 301, 11)],  # sample 2 left after one token
        [(1, 102, 12)],
    ]
    assert rows == {1: [0, 0, 0], 2: [1], 3: [2, 1]}  # each sample's logits row in its batch
    assert lock.evaluated == 6 and lock.batches == [3, 2, 1]


def test_a_failed_decode_ends_every_sample_with_its_error():
    ctx = _Ctx(fail_at=1)
    lock, rows, errors = _run([4, 4], ctx)
    assert isinstance(lock.error, RuntimeError) and len(ctx.batches) == 1
    assert set(errors) == {1, 2} and all(e is lock.error for e in errors.values())


def test_a_cancelled_signal_stops_before_the_next_batch():
    cancel = threading.Event()
    cancel.set()
    lock, _, errors = _run([2, 2], _Ctx(), cancel)
    assert isinstance(lock.error, Cancelled) and set(errors) == {1, 2}


# -- on the real SmolLM2 ------------------------------------------------------------------------
PROMPT = "Name a colour and say in one sentence why people like it."
KW = dict(max_tokens=24, temperature=0.9, seed=11)


def _model(batch_samples: int, n_ctx: int = 2048):
    from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM

    return LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=n_ctx, batch_samples=batch_samples))


@pytest.fixture(scope="module")
def batched():
    llm = _model(8)
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def alone():
    llm = _model(0)
    yield llm
    llm.close()


@pytest.mark.slow
def test_batched_samples_depend_only_on_the_request(batched):
    first = batched.generate(PROMPT, n=3, **KW)
    batched.generate("Something else: count to five.", max_tokens=12)
    batched.generate("And more: " + PROMPT, n=2, **KW)
    assert batched.generate(PROMPT, n=3, **KW).texts == first.texts
    fresh = _model(8)
    try:
        assert fresh.generate(PROMPT, n=3, **KW).texts == first.texts
    finally:
        fresh.close()
    assert len(set(first.texts)) > 1  # three seeds, three samples


@pytest.mark.slow
def test_the_prompt_is_evaluated_once_for_all_samples(batched):
    batched.clear_cache()
    gen = batched.generate(PROMPT, n=4, **KW)
    single = gen.prompt_tokens // 4
    assert gen.prompt_tokens == 4 * single  # the prompt counted once per sample, as n calls would
    assert gen.prompt_tokens_evaluated == single  # ... and evaluated once
    assert len(gen.completions) == 4 and gen.completion_tokens >= 4


@pytest.mark.slow
def test_batch_samples_0_draws_each_seed_alone(alone):
    gen = alone.generate(PROMPT, n=3, **KW)
    singles = [alone.generate(PROMPT, max_tokens=24, temperature=0.9, seed=11 + i).text for i in range(3)]
    assert gen.texts == singles


@pytest.mark.slow
def test_a_single_call_does_not_depend_on_batch_samples(batched, alone):
    """The context that holds several sequences gives one request the numbers of the single-
    sequence context: greedy, seeded and scored."""
    for kw in (dict(max_tokens=24), dict(max_tokens=24, temperature=0.9, seed=3)):
        assert batched.generate(PROMPT, **kw).text == alone.generate(PROMPT, **kw).text
    assert batched.loglikelihood(PROMPT, " Blue").token_logprobs == alone.loglikelihood(PROMPT, " Blue").token_logprobs


@pytest.mark.slow
def test_how_often_batched_samples_differ_from_the_same_seeds_alone(batched, alone):
    """llama.cpp's kernels for a batch of two or more tokens are not those for one token (logits
    differ by up to ~0.3 on SmolLM2), so a batched sample may differ from its seed drawn alone:
    the same first token always (both sample it from the prompt's logits), then possibly not."""
    prompts = [PROMPT, "Write one question about rivers.", "Say hello to a friend in one line."]
    firsts = []
    for p in prompts:
        together = batched.generate(p, n=3, max_tokens=12, temperature=0.9, seed=5).completions
        apart = alone.generate(p, n=3, max_tokens=12, temperature=0.9, seed=5).completions
        firsts += [a.text[:1] == b.text[:1] for a, b in zip(together, apart)]
    assert all(firsts)


@pytest.mark.slow
def test_batched_samples_keep_stops_lengths_and_schemas(batched):
    gen = batched.generate("Count from one to twenty in words, separated by commas.", n=3, max_tokens=10,
                           temperature=0.8, seed=1)
    assert all(c.finish_reason in ("length", "stop") for c in gen.completions)
    assert gen.completion_tokens <= 30
    gen = batched.generate("Count from one to twenty in words, one per line.", n=3, max_tokens=40, temperature=0.8,
                           seed=1, stop=["\n"])
    assert all("\n" not in t for t in gen.texts)
    schema = json.dumps({"type": "object", "properties": {"colour": {"type": "string", "maxLength": 12}},
                         "required": ["colour"]})
    gen = batched.generate(PROMPT + " Reply in JSON.", n=3, max_tokens=40, temperature=0.9, seed=2, schema=schema)
    for c in gen.completions:
        if c.finish_reason != "length":
            assert isinstance(json.loads(c.text)["colour"], str)


@pytest.mark.slow
def test_samples_that_do_not_fit_are_drawn_alone(alone):
    small = _model(2)
    try:  # three samples, a batch of two at most: one by one, each equal to its seed alone
        assert small.generate(PROMPT, n=3, **KW).texts == alone.generate(PROMPT, n=3, **KW).texts
    finally:
        small.close()
    tight, tight_alone = _model(8, n_ctx=128), _model(0, n_ctx=128)
    try:  # 4 x 60 tokens do not fit the context (128, padded to 256 cells) beside the prompt: one by one
        gen = tight.generate(PROMPT, n=4, max_tokens=60, temperature=0.9, seed=1)
        assert gen.prompt_tokens // 4 + 4 * 60 > tight.context_tokens
        assert gen.texts == tight_alone.generate(PROMPT, n=4, max_tokens=60, temperature=0.9, seed=1).texts
    finally:
        tight.close()
        tight_alone.close()


@pytest.mark.slow
def test_a_cancelled_batch_stops_and_leaves_the_model_as_it_was(batched):
    reference = batched.generate(PROMPT, n=2, **KW).texts
    event = threading.Event()
    timer = threading.Timer(0.3, event.set)
    timer.start()
    with pytest.raises(Cancelled), cancellable(event):
        batched.generate("Write a long story about a river, a town and a market.", n=4, max_tokens=2000,
                         temperature=0.9, seed=1)
    timer.cancel()
    assert batched.generate(PROMPT, n=2, **KW).texts == reference


# -- the evaluated prompt tokens, counted and shown ---------------------------------------------------
def test_usage_counts_evaluated_prompt_tokens_and_shows_them():
    from hopqa.types import Usage

    usage = Usage()
    usage.record_llm(100, 5, cached=False, evaluated=30)
    usage.record_llm(50, 5, cached=False)  # a backend that does not say: its whole prompt
    usage.record_llm(70, 5, cached=True, evaluated=70)  # from the response cache: nothing
    assert (usage.prompt_tokens, usage.prompt_tokens_evaluated) == (150, 80)
    assert "150 prompt (80 evaluated) + 10 completion tokens" in usage.summary()
    assert Usage.from_dict(usage.to_dict()).prompt_tokens_evaluated == 80
    old = Usage.from_dict({"llm_calls": 1, "prompt_tokens": 40})  # a record from before the count
    assert old.prompt_tokens_evaluated == 40 and "40 prompt + " in old.summary()


def test_traced_calls_and_the_eval_summary_carry_the_evaluated_tokens(tmp_path):
    from hopqa.evaluation.runner import summarize
    from hopqa.llm.base import Completion, Generation
    from hopqa.llm.scripted import ScriptedLLM
    from hopqa.runtime import traced_llm
    from hopqa.trace import Trace
    from hopqa.types import Usage

    class Reused(ScriptedLLM):
        def _complete(self, request):
            return Generation([Completion("ok")], prompt_tokens=200, completion_tokens=1, prompt_tokens_evaluated=64)

    llm = traced_llm(Reused())
    trace = Trace(question="q")
    with trace.activate():
        llm.generate("p")
    assert trace.root.llm_calls[0]["prompt_tokens_evaluated"] == 64
    assert (llm.total.prompt_tokens, llm.total.prompt_tokens_evaluated) == (200, 64)
    records = [{"id": str(i), "status": "ok", "metrics": {"f1": 1.0}, "usage": llm.total.to_dict()} for i in range(2)]
    summary = summarize(records, tmp_path)
    assert summary.cost["prompt_tokens_evaluated_per_q"] == 64 and summary.cost["prompt_tokens_per_q"] == 200
    assert Usage.from_dict(records[0]["usage"]).prompt_tokens_evaluated == 64


def test_a_servers_cached_tokens_are_not_evaluated_and_the_service_reports_them():
    from hopqa.llm.openai import evaluated_tokens
    from hopqa.server.openai_compat import _usage

    assert evaluated_tokens({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 640}}, 900) == 260
    assert evaluated_tokens({"prompt_tokens": 900}, 900) is None  # the server does not say
    assert evaluated_tokens({"prompt_tokens_details": {"cached_tokens": "many"}}, 900) is None
    assert evaluated_tokens({"prompt_tokens_details": {"cached_tokens": True}}, 900) is None
    out = _usage({"usage": {"prompt_tokens": 300, "prompt_tokens_evaluated": 100, "completion_tokens": 7}})
    assert out["prompt_tokens_details"] == {"cached_tokens": 200} and out["total_tokens"] == 307
