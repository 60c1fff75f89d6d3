"""The embedded model's prefix cache (issue 31): ``hopqa.llm.prefix_cache.PrefixCache`` exactly,
then on the real SmolLM2: which tokens are evaluated, and that outputs never change."""

from __future__ import annotations

import itertools

import pytest

from hopqa.llm.prefix_cache import PrefixCache, common_prefix


# -- the cache's own rules --------------------------------------------------------------------------
def test_the_longest_shared_prefix_in_whole_blocks_within_the_limit():
    cache = PrefixCache(budget=10_000)
    cache.put(list(range(10)), b"a" * 10)
    cache.put([0, 1, 2, 9, 9, 9, 9, 9], b"b" * 10)
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    n, entry = cache.longest(list(range(20)), block=4, limit=19)
    assert n == 8 and entry.tokens == tuple(range(10))  # 10 shared, whole blocks of 4: 8
    n, entry = cache.longest(list(range(20)), block=4, limit=5)
    assert n == 4  # never more than the limit (the caller evaluates at least one token)
    assert cache.longest([0, 1, 2, 9, 9, 9, 9, 9, 9], block=4, limit=8)[1].tokens[3] == 9
    assert cache.longest([0, 1, 7], block=4, limit=3) is None  # less than a block shared
    assert cache.stats()["hits"] == 3 and cache.stats()["misses"] == 1


def test_an_entry_that_another_extends_is_dropped():
    cache = PrefixCache(budget=10_000)
    cache.put([1, 2, 3, 4], b"x" * 4)
    cache.put([1, 2, 3, 4, 5, 6, 7, 8], b"y" * 8)  # serves every prompt the first served
    assert len(cache) == 1 and cache.size == 8
    assert cache.covers([1, 2, 3, 4]) and cache.covers([1, 2, 3, 4, 5, 6, 7, 8]) and not cache.covers([1, 2, 9])
    cache.put([1, 2, 9, 9], b"z" * 4)  # a sibling branch is kept
    assert len(cache) == 2


def test_least_recently_used_entries_go_first_and_a_snapshot_over_the_budget_is_not_kept():
    cache = PrefixCache(budget=25)
    for i in range(3):
        assert cache.put([i] * 4, bytes(10))
    assert len(cache) == 2 and cache.stats()["evictions"] == 1 and cache.size == 20
    assert cache.longest([1] * 4, block=4, limit=4) is not None  # [1]*4 now most recent
    cache.put([7] * 4, bytes(10))
    assert cache.covers([1] * 4) and not cache.covers([2] * 4)
    assert not cache.put([8] * 4, bytes(26)) and not cache.covers([8] * 4)
    with pytest.raises(ValueError):
        PrefixCache(budget=-1)


# -- on the real SmolLM2 ---------------------------------------------------------------------------------
BLOCK = 64
SHARED = ("Passages: " + " ".join(f"Paragraph {i}: The town number {i} lies on the river and has a market."
                                  for i in range(14)) + "\n")
PROMPTS = {
    "a": SHARED + "Question: Which town has a market? Answer in one word.",
    "b": "Something else entirely: list five colours, then five animals, then five fruits, one per line. " * 4,
    "c": SHARED + "Question: On what does the town number 3 lie? Answer briefly.",
}


def _model(prefix_cache_mb: int):
    from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM

    return LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=4096, prefix_cache_mb=prefix_cache_mb))


@pytest.fixture(scope="module")
def cached():
    llm = _model(2048)
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def reference():
    """What each request gives without a prefix cache (the same whatever ran before: the
    backend's block-aligned reuse), computed once."""
    llm = _model(0)
    out = {}
    for key, prompt in PROMPTS.items():
        out[key, "greedy"] = llm.generate(prompt, max_tokens=24).text
        out[key, "sample"] = llm.generate(prompt, max_tokens=24, temperature=0.9, seed=7).text
        out[key, "score"] = llm.loglikelihood(prompt, " The river").token_logprobs
    llm.close()
    return out


def _evaluated(llm, prompt: str) -> tuple[int, int]:
    """(tokens evaluated, prompt tokens) of a one-token generation of ``prompt``."""
    before = llm.evaluated_tokens
    gen = llm.generate(prompt, max_tokens=1)
    return llm.evaluated_tokens - before, gen.prompt_tokens


@pytest.mark.slow
def test_a_prompt_seen_before_another_evaluates_only_its_last_partial_block(cached):
    cached.clear_cache()
    first, tokens = _evaluated(cached, PROMPTS["a"])
    assert first == tokens  # nothing cached yet
    _evaluated(cached, PROMPTS["b"])  # the KV cache now holds b, the prefix cache a and b
    again, tokens = _evaluated(cached, PROMPTS["a"])
    assert again == tokens - (tokens - 1) // BLOCK * BLOCK  # only the last partial block (>= 1 token)
    assert cached.prefix_cache.stats()["restored_tokens"] >= tokens - BLOCK


@pytest.mark.slow
def test_two_prompts_sharing_blocks_evaluate_them_once(cached):
    cached.clear_cache()
    _evaluated(cached, PROMPTS["a"])
    _evaluated(cached, PROMPTS["b"])
    restored = cached.prefix_cache.stats()["restored_tokens"]
    evaluated, tokens = _evaluated(cached, PROMPTS["c"])  # shares SHARED (and the template) with a
    shared = cached.prefix_cache.stats()["restored_tokens"] - restored
    assert shared >= 3 * BLOCK and evaluated == tokens - shared


@pytest.mark.slow
@pytest.mark.parametrize("order", list(itertools.permutations("abc"))[::2])
def test_outputs_equal_those_without_the_cache_in_any_order(cached, reference, order):
    for key in order:
        assert cached.generate(PROMPTS[key], max_tokens=24).text == reference[key, "greedy"]
        assert cached.loglikelihood(PROMPTS[key], " The river").token_logprobs == reference[key, "score"]
    for key in reversed(order):
        assert cached.generate(PROMPTS[key], max_tokens=24, temperature=0.9, seed=7).text == reference[key, "sample"]


@pytest.mark.slow
def test_eviction_under_a_tiny_budget_keeps_results_correct(reference):
    llm = _model(6)  # MiB: room for a's 256 tokens of SmolLM2 (5.9 MB), not for b's 64 beside them
    try:
        for key in "abcabc":
            assert llm.generate(PROMPTS[key], max_tokens=24).text == reference[key, "greedy"]
        stats = llm.prefix_cache.stats()
        assert stats["evictions"] >= 1 and stats["bytes"] <= 6 << 20
    finally:
        llm.close()


@pytest.mark.slow
def test_the_trace_counts_the_prompt_tokens_evaluated(cached):
    from hopqa.runtime import traced_llm
    from hopqa.trace import Trace

    cached.clear_cache()
    llm = traced_llm(cached)
    trace = Trace(question="q")
    with trace.activate():
        llm.generate(PROMPTS["a"], max_tokens=4)
        llm.generate(PROMPTS["c"], max_tokens=4)
        llm.generate(PROMPTS["b"], max_tokens=4)
        llm.generate(PROMPTS["a"], max_tokens=4)
        llm.loglikelihood(PROMPTS["a"], " The river")  # raw text: no chat template, shares nothing
    calls = trace.root.llm_calls
    assert [c["prompt_tokens_evaluated"] <= c["prompt_tokens"] for c in calls] == [True] * 5
    assert calls[0]["prompt_tokens_evaluated"] == calls[0]["prompt_tokens"]  # nothing cached before
    assert calls[1]["prompt_tokens_evaluated"] <= calls[1]["prompt_tokens"] - 3 * BLOCK  # a's blocks reused
    # the prefix cache's part: c reused a's blocks from the live KV cache (nothing restored); after
    # b, a's blocks came back from a snapshot
    uses = [c["prefix_cache"] for c in calls]
    assert [u["restored"] for u in uses[:3]] == [0, 0, 0] and [u["evicted"] for u in uses] == [0] * 5
    assert uses[3]["restored"] == calls[3]["prompt_tokens"] - calls[3]["prompt_tokens_evaluated"] >= 3 * BLOCK
    assert uses[4]["restored"] == 0  # its context shares no whole block with a cached prefix
    assert uses[0]["entries"] == 1 and uses[2]["entries"] >= 2 and 0 < uses[0]["mb"] < uses[2]["mb"]
    assert uses[4]["entries"] == uses[3]["entries"] + 1 == cached.prefix_cache.stats()["entries"]


def test_each_call_records_its_share_of_the_cache_counters():
    from hopqa.llm.base import Completion, Generation, merge_generations

    cache = PrefixCache(budget=25)
    cache.put([0] * 4, bytes(10))
    mark = cache.mark()
    cache.count_restored(4)
    for i in (1, 2):
        cache.put([i] * 4, bytes(10))  # the second evicts [0]*4
    assert cache.use_since(mark) == {"restored": 4, "evicted": 1, "entries": 2, "mb": 0.0}
    assert cache.use_since(cache.mark())["restored"] == 0

    def part(use):
        return Generation([Completion("x")], prefix_cache=use)

    one = {"restored": 64, "evicted": 0, "entries": 3, "mb": 1.5}
    two = {"restored": 128, "evicted": 1, "entries": 2, "mb": 1.0}
    assert merge_generations([part(one), part(two)]).prefix_cache == {"restored": 192, "evicted": 1,
                                                                      "entries": 2, "mb": 1.0}
    assert merge_generations([part(None), part(None)]).prefix_cache is None


def test_samples_drawn_as_several_calls_add_their_evaluated_tokens():
    from hopqa.llm.base import Completion, Generation, merge_generations

    def part(evaluated):
        return Generation([Completion("x")], prompt_tokens=100, prompt_tokens_evaluated=evaluated)

    assert merge_generations([part(100), part(36)]).prompt_tokens_evaluated == 136
    assert merge_generations([part(100), part(None)]).prompt_tokens_evaluated is None  # unknown stays unknown


def test_the_trace_records_the_prefix_cache_of_calls_the_model_made_not_of_cache_hits(tmp_path):
    from dataclasses import replace

    from hopqa.llm.cache import CachedLLM, ResponseCache
    from hopqa.llm.scripted import ScriptedLLM
    from hopqa.runtime import traced_llm
    from hopqa.trace import Trace

    use = {"restored": 128, "evicted": 0, "entries": 2, "mb": 3.5}

    class WithPrefixCache(ScriptedLLM):
        def _complete(self, request):
            return replace(super()._complete(request), prefix_cache=use, prompt_tokens_evaluated=1)

    cache = ResponseCache(tmp_path)
    llm = traced_llm(CachedLLM(WithPrefixCache(lambda request: "x"), cache))
    trace = Trace(question="q")
    with trace.activate():
        llm.generate("the same prompt", max_tokens=4)
        llm.generate("the same prompt", max_tokens=4)  # a response-cache hit: the model did nothing
    cache.close()
    first, hit = trace.root.llm_calls
    assert first["prefix_cache"] == use and not first["cached"]
    assert hit["cached"] and "prefix_cache" not in hit and hit["prompt_tokens_evaluated"] == 0
