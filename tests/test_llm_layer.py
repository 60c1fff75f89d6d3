"""The LLM layer with scripted backends: requests, n-splitting, capabilities, cache, usage,
concurrency bounds, tracing."""

from __future__ import annotations

import threading

import pytest

from hopqa.llm import (
    CachedLLM,
    GenerationRequest,
    LLMBase,
    LLMSpecError,
    ResponseCache,
    UnsupportedCapability,
    load_llm,
)
from hopqa.llm.base import (
    LOGLIKELIHOOD,
    LOGPROBS,
    NATIVE_N,
    Completion,
    Generation,
    cap_completion,
    reply_cap,
    request_key,
)
from hopqa.llm.scripted import ScriptedLLM
from hopqa.runtime import TracedLLM, accounting
from hopqa.trace import Trace, step
from hopqa.types import Usage


def test_request_from_prompt_and_messages():
    r = GenerationRequest.make("hi", stop="\n", max_tokens=5)
    assert r.prompt == "hi" and r.stop == ("\n",) and r.as_messages() == [{"role": "user", "content": "hi"}]
    m = GenerationRequest.make([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    assert m.as_messages()[0] == {"role": "system", "content": "s"}
    assert "system: s" in m.text()


def test_cache_key_covers_every_field():
    ident = {"backend": "x", "model": "m"}
    base = GenerationRequest.make("q")
    keys = {request_key(ident, "generate", base.key_dict())}
    for change in [dict(n=2), dict(temperature=0.5), dict(top_p=0.9), dict(max_tokens=7), dict(stop=("x",)),
                   dict(logprobs=True), dict(seed=3), dict(prompt="other")]:
        from dataclasses import replace

        keys.add(request_key(ident, "generate", replace(base, **change).key_dict()))
    keys.add(request_key({"backend": "x", "model": "other"}, "generate", base.key_dict()))
    keys.add(request_key(ident, "loglikelihood", base.key_dict()))
    assert len(keys) == 11
    assert request_key(ident, "generate", base.key_dict()) == request_key(dict(ident), "generate", base.key_dict())


def test_n_samples_split_into_seeded_single_calls():
    llm = ScriptedLLM(replies=lambda r: f"seed={r.seed}")
    gen = llm.generate("q", n=3, temperature=0.7, seed=10)
    assert gen.texts == ["seed=10", "seed=11", "seed=12"]
    assert all(r.n == 1 for r in llm.requests)


def test_native_n_is_one_call():
    llm = ScriptedLLM(replies=lambda r: "x", capabilities={"generate", NATIVE_N})
    gen = llm.generate("q", n=4)
    assert len(gen.texts) == 4 and len(llm.requests) == 1


def test_unsupported_capability_names_backend_and_capability():
    llm = ScriptedLLM(replies=["a"], name="tiny")
    with pytest.raises(UnsupportedCapability) as e:
        llm.loglikelihood("a", "b")
    assert "tiny" in str(e.value) and LOGLIKELIHOOD in str(e.value)
    with pytest.raises(UnsupportedCapability) as e:
        llm.generate("q", logprobs=True)
    assert LOGPROBS in str(e.value)


def test_cache_hit_is_marked_and_costs_no_tokens(tmp_path):
    inner = ScriptedLLM(replies=["first", "second"])
    llm = TracedLLM(CachedLLM(inner, ResponseCache(tmp_path / "c")))
    usage = Usage()
    with accounting(usage):
        a = llm.generate("same prompt", max_tokens=5)
        b = llm.generate("same prompt", max_tokens=5)
        c = llm.generate("same prompt", max_tokens=6)
    assert (a.text, b.text, c.text) == ("first", "first", "second")
    assert not a.cached and b.cached and not c.cached
    assert len(inner.requests) == 2
    assert usage.llm_calls == 3 and usage.cache_hits == 1
    assert usage.prompt_tokens == 2 * len("same prompt".split())
    assert usage.completion_tokens == 2


def test_cache_persists_across_instances_and_processes(tmp_path):
    d = tmp_path / "c"
    CachedLLM(ScriptedLLM(replies=["x"]), ResponseCache(d)).generate("p")
    again = CachedLLM(ScriptedLLM(replies=[]), ResponseCache(d)).generate("p")
    assert again.cached and again.text == "x"
    import subprocess
    import sys

    code = (
        "from hopqa.llm import CachedLLM, ResponseCache\n"
        "from hopqa.llm.scripted import ScriptedLLM\n"
        f"g = CachedLLM(ScriptedLLM(replies=[]), ResponseCache({str(d)!r})).generate('p')\n"
        "print(g.cached, g.text)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True x"


def test_cache_is_safe_under_threads(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    llm = CachedLLM(ScriptedLLM(replies=lambda r: r.prompt.upper(), max_concurrency=8), cache)
    errors = []

    def work(i):
        try:
            for j in range(20):
                assert llm.generate(f"p{j % 5}").text == f"P{j % 5}"
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors and len(cache) == 5


def test_loglikelihood_cached(tmp_path):
    inner = ScriptedLLM(scorer=lambda c, x: [-1.0] * len(x.split()))
    llm = CachedLLM(inner, ResponseCache(tmp_path / "c"))
    a = llm.loglikelihood("ctx", "a b c")
    b = llm.loglikelihood("ctx", "a b c")
    assert a.total == -3.0 and a.mean == -1.0 and b.cached and not a.cached


def test_loglikelihoods_score_every_continuation_after_one_context_through_the_cache_and_the_trace(tmp_path):
    inner = ScriptedLLM(scorer=lambda c, x: [-1.0] * len(x.split()))
    plain = inner.loglikelihoods("ctx", ["a", "a b", "a b c"])  # a backend without a shared path: pair by pair
    assert [ll.total for ll in plain] == [-1.0, -2.0, -3.0] and inner.loglikelihoods("ctx", []) == []
    cached = CachedLLM(inner, ResponseCache(tmp_path / "c"))
    cached.loglikelihood("ctx", "a b")  # one of them cached before
    llm = TracedLLM(cached)
    trace, usage = Trace(question="q"), Usage()
    with trace.activate(), accounting(usage), step("s") as s:
        first = llm.loglikelihoods("ctx", ["a", "a b", "a b c"])
        again = llm.loglikelihoods("ctx", ["a", "a b", "a b c"])
    assert [ll.total for ll in first] == [-1.0, -2.0, -3.0] == [ll.total for ll in again]
    assert [ll.cached for ll in first] == [False, True, False] and all(ll.cached for ll in again)
    calls = s.llm_calls
    assert len(calls) == 2  # one record a call, not one a continuation
    assert {k: calls[0][k] for k in ("type", "context", "continuations", "totals", "cached")} == {
        "type": "loglikelihood", "context": "ctx", "continuations": ["a", "a b", "a b c"],
        "totals": [-1.0, -2.0, -3.0], "cached": False}
    assert calls[0]["prompt_tokens"] == 2 and calls[1]["cached"] and calls[1]["prompt_tokens"] == 0
    assert usage.llm_calls == 2 and usage.cache_hits == 1


def test_chat_reply_without_a_template_ends_the_reply_with_a_newline(tmp_path):
    inner = ScriptedLLM(replies=[])
    assert inner.chat_reply("Rate it.", "10") == ("Rate it.\n", "10\n")
    assert TracedLLM(CachedLLM(inner, ResponseCache(tmp_path / "c"))).chat_reply("Rate it.", "1") == ("Rate it.\n", "1\n")


@pytest.mark.parametrize("bound", [1, 3])
def test_concurrency_is_bounded(bound):
    # Each call waits until `bound` calls are in flight together (a barrier, not a sleep): the
    # bound is reached whatever the machine's load, and going over it would show.
    gate = threading.Barrier(bound, timeout=20)
    llm = ScriptedLLM(replies=lambda r: "x", max_concurrency=bound, gate=gate.wait)
    reqs = [GenerationRequest.make(f"q{i}") for i in range(9)]
    out = llm.map(reqs, workers=8)
    assert len(out) == 9
    assert llm.max_in_flight == bound


def test_map_keeps_order():
    llm = ScriptedLLM(replies=lambda r: r.prompt, max_concurrency=4, delay=0.01)
    out = llm.map([GenerationRequest.make(str(i)) for i in range(12)])
    assert [g.text for g in out] == [str(i) for i in range(12)]


def test_traced_calls_land_in_the_open_step_even_from_threads():
    llm = TracedLLM(ScriptedLLM(replies=lambda r: "ok", max_concurrency=4))
    trace = Trace(question="q")
    usage = Usage()
    with accounting(usage), trace.activate():
        with step("outer"):
            with step("samples") as s:
                llm.generate("p", n=4, temperature=0.7)
    samples = trace.root.find("samples")[0]
    assert len(samples.llm_calls) == 1 and samples.llm_calls[0]["outputs"] == ["ok"] * 4
    assert usage.llm_calls == 1
    assert s is samples


def test_traced_error_is_recorded():
    class Boom(LLMBase):
        name = "boom"

        def _complete(self, request):
            raise RuntimeError("server exploded")

    llm = TracedLLM(Boom())
    trace = Trace(question="q")
    with trace.activate(), pytest.raises(RuntimeError), step("gen") as s:
        llm.generate("p")
    assert "server exploded" in s.llm_calls[0]["error"] and "server exploded" in s.error


def test_usage_per_question_and_in_total():
    from hopqa.build import build_method

    method = build_method("direct", ScriptedLLM(replies=["a", "b", "c"]))
    answers = [method.answer(q) for q in ["q one", "q two", "q three"]]
    assert [a.usage.llm_calls for a in answers] == [1, 1, 1]
    assert method.llm.total.llm_calls == 3
    assert method.llm.total.completion_tokens == sum(a.usage.completion_tokens for a in answers) == 3


# -- the reply cap -----------------------------------------------------------------------------
def test_reply_cap_value():
    assert reply_cap(0) == reply_cap(32) == reply_cap(125) == 2000
    assert reply_cap(256) == 4096 and reply_cap(1000) == 16000


def test_long_replies_are_cut_and_marked_for_every_backend(tmp_path):
    long = "word " * 20_000  # 100,000 characters for max_tokens=10
    inner = ScriptedLLM(replies=lambda r: long if "long" in r.prompt else "short")
    llm = TracedLLM(CachedLLM(inner, ResponseCache(tmp_path / "c")))
    trace = Trace(question="q")
    with trace.activate(), step("gen") as s:
        gen = llm.generate("long please", max_tokens=10)
        again = llm.generate("long please", max_tokens=10)
        short = llm.generate("short please", max_tokens=10)
    c = gen.completions[0]
    assert len(c.text) == 2000 and c.text == long[:2000] and c.truncated and c.finish_reason == "length"
    assert again.cached and again.completions[0] == c
    assert short.text == "short" and not short.completions[0].truncated
    assert s.events == [{"message": "LLM reply truncated", "backend": "scripted", "chars": [100_000], "cap": 2000,
                         "max_tokens": 10}]
    assert s.llm_calls[0]["outputs"] == [long[:2000]]


def test_long_samples_are_cut_when_n_is_split():
    llm = ScriptedLLM(replies=lambda r: "y" * 5000)
    gen = llm.generate("p", n=3, temperature=0.5, max_tokens=200)
    assert [len(t) for t in gen.texts] == [3200] * 3 and all(c.truncated for c in gen.completions)


def test_cache_hits_written_before_the_cap_are_cut(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    req = GenerationRequest.make("p", max_tokens=5)
    key = request_key(ScriptedLLM().identity(), "generate", req.key_dict())
    cache.set(key, Generation(completions=[Completion(text="z" * 9000)], backend="scripted").to_dict())
    gen = CachedLLM(ScriptedLLM(replies=[]), cache).complete(req)
    assert gen.cached and len(gen.text) == 2000 and gen.completions[0].truncated


def test_cap_keeps_the_tokens_that_fit():
    c = Completion(text="ab cd ef", tokens=["ab", " cd", " ef"], logprobs=[-1.0, -2.0, -3.0])
    cut = cap_completion(c, 6)
    assert (cut.text, cut.tokens, cut.logprobs, cut.truncated) == ("ab cd ", ["ab", " cd"], [-1.0, -2.0], True)
    assert cap_completion(c, 8) is c and not c.truncated
    old = Generation.from_dict({"completions": [{"text": "x", "finish_reason": "stop", "tokens": None,
                                                 "logprobs": None}]})
    assert old.completions[0].truncated is False  # cache entries without the field still load


# -- LLM specs -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, expected",
    [
        ("foo:bar",
         "unknown LLM backend 'foo' in 'foo:bar': use embedded:NAME, embedded:PATH.gguf or openai:MODEL@http://host:port/v1"),
        ("foo:m@http://u:topsecret@h/v1", "unknown LLM backend 'foo' in 'foo:m@http://***@h/v1'"),
        ("openai:m@http://u:topsecret@h/v1?timeout=abc", "bad value 'abc' for the LLM option 'timeout'"),
        ("openai:m@http://h/v1?retires=3",
         "unknown option 'retires' (did you mean 'retries'?); known options: concurrency, timeout, retries"),
        ("embedded:smollm2-135m?n_ctx=big",
         "option n_ctx must be a whole number, not 'big' (as in embedded:NAME?n_ctx=4096&n_threads=2)"),
        ("embedded:smollm2-135m?n_ctxx=4096",
         "unknown option 'n_ctxx' (did you mean 'n_ctx'?); known options: n_ctx, n_threads"),
        ("embedded:smollm2-135m?logits_all=perhaps",
         "option logits_all must be true or false, not 'perhaps' (as in embedded:NAME?n_ctx=4096"),
        ("embedded:smollm2-135m?block=0", "option block must be at least 1, not 0"),
        ("embedded:smollm2-135m?seed=http://u:topsecret@h", "option seed must be a whole number, not 'http://***@h'"),
    ],
)
def test_bad_llm_specs_are_one_line_value_errors(tmp_path, spec, expected):
    from hopqa.llm import parse_embedded

    with pytest.raises(LLMSpecError) as e:
        if spec.startswith("embedded:"):  # parsed alone: a wrongly accepted spec must not load a model
            parse_embedded(spec.partition(":")[2])
        else:
            load_llm(spec, home=tmp_path, cache=False)
    msg = str(e.value)
    assert isinstance(e.value, ValueError) and expected in msg and "\n" not in msg and "topsecret" not in msg
