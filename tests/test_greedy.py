"""Greedy decoding under a grammar checks the model's top token first (``hopqa.llm.greedy``):
the same tokens as llama-cpp-python's full sampler chain, on the real SmolLM2."""

from __future__ import annotations

import json

import pytest

from hopqa.llm import greedy

SCHEMAS = [
    {"type": "object", "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
     "required": ["answer", "confidence"]},
    {"type": "object", "properties": {"steps": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"question": {"type": "string"},
                                         "depends_on": {"type": "array", "items": {"type": "integer"}}},
        "required": ["question", "depends_on"]}}}, "required": ["steps"]},
    {"type": "object", "properties": {"label": {"enum": ["SUPPORTED", "IRRELEVANT", "PARTIAL"]}},
     "required": ["label"]},
]
PROMPTS = [
    "Who wrote Hamlet? Answer in JSON.",
    "Plan the sub-questions for: in which county is the town where the author of Dracula was born?",
    "Is the paragraph 'Paris is the capital of France.' relevant to 'capital of Germany'? Reply in JSON.",
]


def test_only_greedy_requests_with_a_grammar_and_neutral_penalties_take_the_shortcut():
    base = {"temp": 0.0, "grammar": object(), "logits_processor": None, "repeat_penalty": 1.0,
            "frequency_penalty": 0.0, "presence_penalty": 0.0}
    assert greedy._greedy_with_grammar(base)
    for change in ({"temp": 0.7}, {"grammar": None}, {"logits_processor": [abs]}, {"repeat_penalty": 1.1},
                   {"frequency_penalty": 0.5}, {"presence_penalty": 0.5}):
        assert not greedy._greedy_with_grammar({**base, **change}), change


@pytest.fixture(scope="module")
def model():
    from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM

    llm = LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(prefix_cache_mb=0))
    yield llm
    llm.close()


def _outputs(llm, monkeypatch, shortcut: bool, temperature: float = 0.0) -> tuple[list, dict[str, int]]:
    taken = {"shortcut": 0, "chain": 0}
    real = greedy.sample

    def counted(llama, options):
        token = real(llama, options) if shortcut else None
        taken["shortcut" if token is not None else "chain"] += 1
        return token

    monkeypatch.setattr(greedy, "sample", counted)
    outs = []
    for schema in SCHEMAS:
        for prompt in PROMPTS:
            gen = llm.generate(prompt, max_tokens=48, schema=json.dumps(schema), temperature=temperature, seed=3)
            outs.append((gen.text, gen.completion_tokens))
    return outs, taken


@pytest.mark.slow
def test_greedy_outputs_under_a_grammar_equal_the_full_chain_token_for_token(model, monkeypatch):
    fast, taken = _outputs(model, monkeypatch, shortcut=True)
    chain, _ = _outputs(model, monkeypatch, shortcut=False)
    assert fast == chain
    assert taken["shortcut"] > taken["chain"] > 0  # both paths ran: top tokens allowed and rejected
    for (text, _), schema in zip(fast, [s for s in SCHEMAS for _ in PROMPTS]):
        if not text.endswith(("}", "]")):
            continue  # cut by max_tokens
        value = json.loads(text)
        assert set(schema["required"]) <= set(value)


@pytest.mark.slow
def test_sampled_requests_keep_the_full_chain(model, monkeypatch):
    fast, taken = _outputs(model, monkeypatch, shortcut=True, temperature=0.8)
    chain, _ = _outputs(model, monkeypatch, shortcut=False, temperature=0.8)
    assert fast == chain and taken["shortcut"] == 0
