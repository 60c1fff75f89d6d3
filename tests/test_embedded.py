"""The embedded llama.cpp backend with the real SmolLM2-135M model."""

from __future__ import annotations

import json
import math

import pytest

from hopqa.llm.base import LLMError, UnsupportedCapability
from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM, resolve_model

pytestmark = pytest.mark.slow


def test_generate_counts_tokens_and_is_deterministic(smollm2):
    a = smollm2.generate("What is the capital of France? Answer in one word.", max_tokens=12)
    b = smollm2.generate("What is the capital of France? Answer in one word.", max_tokens=12)
    assert a.text and a.text == b.text
    assert a.prompt_tokens > 5 and 0 < a.completion_tokens <= 12


def test_n_samples_with_seeds(smollm2):
    gen = smollm2.generate("Name a colour.", n=3, temperature=1.0, max_tokens=8, seed=1)
    assert len(gen.texts) == 3
    again = smollm2.generate("Name a colour.", n=3, temperature=1.0, max_tokens=8, seed=1)
    assert again.texts == gen.texts
    assert len(set(gen.texts)) > 1  # three seeds, three draws (seed, seed + 1, seed + 2)


def _fresh(**options: object) -> LlamaCppLLM:
    return LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=4096, **options))


def _history(llm: LlamaCppLLM) -> None:
    """Calls that leave the KV cache in states a later request can share a prefix with: the
    same chat template, a longer and a shorter prompt with a common start, a scoring call."""
    llm.generate("What is the capital of France? Answer in one word.", max_tokens=12)
    llm.generate("Name a colour. Then name a fruit and an animal, and say why.", max_tokens=20)
    llm.loglikelihood("Name a colour. One colour is", " blue")
    llm.generate("Name a", max_tokens=3, temperature=1.0, seed=5)


SEEDED = ("Name a colour.", "Write one sentence about the sea.")


def test_seeded_sampling_does_not_depend_on_what_ran_before(smollm2):
    """The same seeded request returns the same samples on a fresh model and after any history
    (the KV cache reuses only whole aligned blocks; see hopqa.llm.llamacpp)."""
    fresh = _fresh()
    try:
        expected = {p: fresh.generate(p, n=4, temperature=1.0, max_tokens=16, seed=1).texts for p in SEEDED}
    finally:
        fresh.close()
    for _ in range(2):
        _history(smollm2)
        for p in SEEDED:
            assert smollm2.generate(p, n=4, temperature=1.0, max_tokens=16, seed=1).texts == expected[p]


def test_token_logprobs_are_exactly_those_of_a_fresh_model():
    """The cause, pinned where it shows on any CPU: a prompt token evaluated alone (a batch of
    one) gets other logits than the same token evaluated in a batch (max difference 0.54 here).
    llama-cpp-python re-evaluates the last prompt token alone when a prompt is repeated, and a
    later prompt reused the one-by-one evaluated generated tokens; sampled text hides this until
    a draw flips. The log-probabilities of a request must equal a fresh model's, bit for bit."""
    prompt = "Name three colours and say which one you like best."

    def model() -> LlamaCppLLM:
        return LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=2048, logits_all=True))

    fresh = model()
    try:
        expected = fresh.generate(prompt, max_tokens=12, logprobs=True).completions[0].logprobs
    finally:
        fresh.close()
    llm = model()
    try:
        for history in ([], [prompt], ["Name three colours."], ["Name three colours and say which one you like"]):
            for p in history:
                llm.generate(p, max_tokens=12)
            assert llm.generate(prompt, max_tokens=12, logprobs=True).completions[0].logprobs == expected
    finally:
        llm.close()


def test_greedy_and_scores_do_not_depend_on_what_ran_before(smollm2):
    prompt = "Describe the Eiffel Tower in two sentences."
    context = "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by"
    fresh = _fresh()
    try:
        text = fresh.generate(prompt, max_tokens=40).text
        scores = fresh.loglikelihood(context, " Gustave Eiffel's company").token_logprobs
    finally:
        fresh.close()
    smollm2.generate("Describe the Statue of Liberty in two sentences.", max_tokens=40)
    assert smollm2.generate(prompt, max_tokens=40).text == text
    smollm2.loglikelihood(context[:40], " and more")  # a shared prefix of an unaligned length
    assert smollm2.loglikelihood(context, " Gustave Eiffel's company").token_logprobs == scores  # exact
    assert smollm2.loglikelihood(context, " Gustave Eiffel's company").token_logprobs == scores  # repeated
    _history(smollm2)
    assert smollm2.generate(prompt, max_tokens=40).text == text


def test_loglikelihood_is_sum_of_token_logprobs(smollm2):
    ll = smollm2.loglikelihood("The capital of France is", " Paris")
    assert ll.tokens and len(ll.tokens) == len(ll.token_logprobs)
    assert math.isclose(ll.total, sum(ll.token_logprobs))
    assert all(x <= 0 for x in ll.token_logprobs)
    # teacher forcing prefers the true continuation
    assert ll.total > smollm2.loglikelihood("The capital of France is", " London").total


def test_loglikelihoods_after_one_context_equal_each_pair_scored_alone(smollm2):
    """``loglikelihoods`` evaluates the context once and each continuation after it: the same
    numbers as scoring every pair alone, whatever the KV and prefix caches held before."""
    context = "Question: Who designed the Eiffel Tower?\nRate the passage from 0 to 10. Reply with the number only.\n"
    conts = ["7\n", "10\n", "1\n", " Gustave Eiffel's company\n", "0"]
    smollm2.clear_cache()
    together = smollm2.loglikelihoods(context, conts)
    alone = [smollm2.loglikelihood(context, c) for c in conts]
    smollm2.clear_cache()
    fresh_alone = [smollm2.loglikelihood(context, c) for c in conts]
    assert [ll.token_logprobs for ll in together] == [ll.token_logprobs for ll in alone] \
        == [ll.token_logprobs for ll in fresh_alone]
    assert [ll.tokens for ll in together] == [ll.tokens for ll in alone]
    assert together[0].prompt_tokens_evaluated > 0 and all(ll.prompt_tokens_evaluated == 0 for ll in together[1:])
    assert smollm2.loglikelihoods(context, ["", ""])[0].token_logprobs == []


def test_chat_reply_renders_the_turn_with_the_models_template(smollm2):
    before, after = smollm2.chat_reply("Rate it. Reply with the number only.", "10")
    assert before.endswith("<|im_start|>user\nRate it. Reply with the number only.<|im_end|>\n<|im_start|>assistant\n")
    assert before.startswith("<|im_start|>system\n") and after == "10<|im_end|>\n"
    # the turn's end is one special token: "1" then the end is not "10" begun
    one = smollm2.loglikelihood(before, "1<|im_end|>\n")
    assert len(one.tokens) == 3 and one.tokens[1] == "<|im_end|>"


def test_loglikelihood_hand_check_against_logits(smollm2):
    """Score = sum over continuation tokens of log softmax(logits before it)[token]: checked by
    evaluating the model step by step through llama.cpp's own API."""
    import numpy as np

    context, cont = "Water boils at", " one hundred degrees"
    ll = smollm2.loglikelihood(context, cont)
    raw = smollm2._llm
    ctx = raw.tokenize(context.encode(), add_bos=True, special=True)
    toks = raw.tokenize(cont.encode(), add_bos=False)
    raw.reset()
    raw.eval(ctx)
    expected = []
    for t in toks:
        logits = np.ctypeslib.as_array(raw._ctx.get_logits(), shape=(raw.n_vocab(),)).astype(np.float64)
        expected.append(logits[t] - (logits.max() + np.log(np.exp(logits - logits.max()).sum())))
        raw.eval([t])
    raw.reset()
    assert len(expected) == len(ll.token_logprobs)
    assert np.allclose(expected, ll.token_logprobs, atol=1e-3)
    # prefix reuse: a second call with the same context gives the same numbers
    assert np.allclose(smollm2.loglikelihood(context, cont).token_logprobs, ll.token_logprobs, atol=1e-4)


def test_a_continuation_scored_in_several_batches_gets_the_same_numbers(smollm2, monkeypatch):
    """The continuation is evaluated ``ROWS_PER_BATCH`` tokens at a time, each batch asking for
    every row: cut into batches of 2 it scores as in one batch (to float noise), every token,
    and the tokens evaluated are counted; a one-token continuation needs no batch."""
    import numpy as np

    from hopqa.llm import llamacpp

    context, cont = "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by", \
        " the engineer Gustave Eiffel, whose company built it for the 1889 World's Fair"
    whole = smollm2.loglikelihood(context, cont)
    monkeypatch.setattr(llamacpp, "ROWS_PER_BATCH", 2)
    before = smollm2.evaluated_tokens
    cut = smollm2.loglikelihood(context, cont)
    assert len(cut.token_logprobs) == len(whole.token_logprobs) > 2 * 5
    assert np.allclose(cut.token_logprobs, whole.token_logprobs, atol=1e-3)
    assert smollm2.evaluated_tokens - before == cut.prompt_tokens_evaluated >= len(cut.token_logprobs) - 1
    one = smollm2.loglikelihood(context, " the")
    assert len(one.token_logprobs) == len(one.tokens) == 1 and one.token_logprobs[0] <= 0


def test_scores_are_those_of_a_model_that_keeps_every_logits_row(smollm2):
    """Without logits_all the continuation is evaluated in one batch asking for each row, so its
    log-probabilities are exactly those of the same model loaded with ``logits_all=1`` (which
    evaluates it as one batch too); token by token, llama.cpp's one-token kernels gave others
    (up to 0.29 apart on SmolLM2, 0.36 on Qwen: ``benchmarks/loglikelihood.py``)."""
    context, cont = "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by", \
        " the engineer Gustave Eiffel, whose company built it for the 1889 World's Fair"
    full = _fresh(logits_all=True)
    try:
        expected = full.loglikelihood(context, cont).token_logprobs
    finally:
        full.close()
    assert smollm2.loglikelihood(context, cont).token_logprobs == expected
    small = _fresh(block=8)  # llama.cpp's batches hold 8 tokens: the continuation goes in several
    try:
        scored = small.loglikelihood(context, cont).token_logprobs
    finally:
        small.close()
    assert len(scored) == len(expected) > 8 and all(x <= 0 for x in scored)


def test_logprobs_need_logits_all(smollm2):
    with pytest.raises(UnsupportedCapability) as e:
        smollm2.generate("hi", logprobs=True)
    assert "logits_all" in str(e.value)


def test_logprobs_with_logits_all():
    llm = LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=512, logits_all=True))
    try:
        gen = llm.generate("What is the capital of France?", max_tokens=8, logprobs=True)
        c = gen.completions[0]
        assert c.logprobs and len(c.logprobs) == len(c.tokens)
        assert 0 < c.mean_prob <= 1
        # the mean token probability (Self-DC's 'prob' confidence), recomputed from the returned logprobs
        assert c.mean_prob == pytest.approx(sum(math.exp(x) for x in c.logprobs) / len(c.logprobs), rel=1e-12)
    finally:
        llm.close()


def test_too_long_prompt_is_a_clear_error():
    llm = LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=256))
    try:
        with pytest.raises(LLMError) as e:
            llm.generate("word " * 600, max_tokens=4)
        assert "n_ctx=256" in str(e.value)
    finally:
        llm.close()


def test_unknown_model_name(tmp_path):
    with pytest.raises(LLMError) as e:
        resolve_model("no-such-model", tmp_path)
    assert "smollm2-135m" in str(e.value)


# -- structured output: a grammar from a JSON schema ------------------------------------------------
PLAN_SCHEMA = {
    "type": "object",
    "properties": {"steps": {"type": "array", "maxItems": 4, "items": {
        "type": "object", "properties": {"question": {"type": "string"},
                                         "depends_on": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
        "required": ["question", "depends_on"], "additionalProperties": False}}},
    "required": ["steps"], "additionalProperties": False,
}
REVIEW_SCHEMA = {
    "type": "object",
    "properties": {"relevant": {"type": "boolean"}, "supports": {"type": "boolean"},
                   "action": {"type": "string", "enum": ["answer", "search", "reject"]},
                   "text": {"type": "string"}},
    "required": ["relevant", "supports", "action", "text"], "additionalProperties": False,
}
CONFIDENCE_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer", "confidence"], "additionalProperties": False,
}
PROMPTS = [
    "Which city hosted the Olympics the year the Berlin Wall fell?",
    "Who directed the film that won Best Picture in 1998, and where was he born?",
    "Is the Nile longer than the Amazon?",
    "What is the capital of the country where Tolstoy was born?",
    "Name the author of the novel adapted into the film Blade Runner.",
]


@pytest.mark.parametrize("schema, task", [
    (PLAN_SCHEMA, "Break the question into steps; give for each step the numbers of the steps it needs."),
    (REVIEW_SCHEMA, "Review this passage for the question: 'The Berlin Wall fell in 1989.' Decide what to do."),
    (CONFIDENCE_SCHEMA, "Answer the question and say how confident you are, from 0 to 1."),
], ids=["plan", "review", "confidence"])
def test_schema_constrained_generation_is_valid_json_every_time(smollm2, schema, task):
    jsonschema = pytest.importorskip("jsonschema")
    for i, question in enumerate(PROMPTS):
        gen = smollm2.generate(f"{task}\nQuestion: {question}\nReply in JSON.", schema=schema, max_tokens=200,
                               temperature=0.7 if i % 2 else 0.0, seed=i)
        completion = gen.completions[0]
        assert completion.finish_reason == "stop", (question, gen.text)
        jsonschema.validate(json.loads(gen.text), schema)


def test_a_json_string_holds_no_control_character():
    """llama-cpp-python's converter lets a string hold a raw newline (JSON forbids it): the
    grammar hopqa compiles has llama.cpp's own rule instead, and llama.cpp accepts it."""
    from llama_cpp import LlamaGrammar

    from hopqa.llm.llamacpp import LOOSE_JSON_CHAR, STRICT_JSON_CHAR, json_grammar

    gbnf = json_grammar(json.dumps(CONFIDENCE_SCHEMA))
    assert STRICT_JSON_CHAR in gbnf and LOOSE_JSON_CHAR not in gbnf
    assert LlamaGrammar.from_string(gbnf, verbose=False) is not None


def test_a_reply_that_ran_on_into_new_lines_stays_json(smollm2):
    """GenSco's first sub-question prompt (Table 7 asking for JSON): under the converter's own
    grammar SmolLM2 wrote the example, two newlines and the next prompt inside the string
    (2026-11-30, on 19 of the 20 questions of the every-method benchmark), a reply Python's JSON rejects."""
    from hopqa.methods.gensco import prompts

    prompt = prompts.DECOMPOSE_JSON_PROMPT.format(
        instruction=prompts.DECOMPOSE_INSTRUCTION, shots=prompts.DECOMPOSE_SHOTS,
        question="What is the seat of the county where Van Hook Township is located?", history="", level=1,
        end="", reply=prompts.FIRST_SUBQUESTION_REPLY)
    gen = smollm2.generate(prompt, schema=prompts.SUBQUESTION_SCHEMA, max_tokens=64)
    assert not any(ord(c) < 32 or ord(c) == 127 for c in gen.text), gen.text
    if gen.completions[0].finish_reason == "stop":
        assert isinstance(json.loads(gen.text)["subquestion"], str)


def test_structured_0_declares_no_capability():
    llm = LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(structured=False))
    try:
        with pytest.raises(UnsupportedCapability, match="structured=0"):
            llm.generate("q", schema=CONFIDENCE_SCHEMA)
    finally:
        llm.close()
