"""The OpenAI-compatible backend against a real server: llama-cpp-python's own
``llama_cpp.server`` serving the embedded SmolLM2 on 127.0.0.1 (started and stopped here)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from hopqa.llm.llamacpp import smollm2_path
from hopqa.llm.openai import OpenAICompatibleLLM, OpenAIConfig

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    port = _free_port()
    log = open(tmp_path_factory.mktemp("server") / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path(None)), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "2048", "--n_threads", "2", "--model_alias", "smollm2"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            except Exception:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"llama_cpp.server did not start; see {log.name}")
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
        log.close()


def test_generate_through_real_server(server_url):
    llm = OpenAICompatibleLLM(OpenAIConfig.parse(f"smollm2@{server_url}?concurrency=2"))
    gen = llm.generate("What is the capital of France? Answer in one word.", max_tokens=10)
    assert gen.text.strip() and gen.prompt_tokens > 0 and gen.completion_tokens > 0
    again = llm.generate("What is the capital of France? Answer in one word.", max_tokens=10)
    assert again.text == gen.text  # temperature 0 is deterministic


def test_n_samples_through_real_server(server_url):
    llm = OpenAICompatibleLLM(OpenAIConfig.parse(f"smollm2@{server_url}"))
    gen = llm.generate("Name a fruit.", n=2, temperature=0.9, max_tokens=6, seed=3)
    assert len(gen.texts) == 2  # native n, or topped up with single calls


def test_logprobs_through_real_server(server_url):
    llm = OpenAICompatibleLLM(OpenAIConfig.parse(f"smollm2@{server_url}"))
    gen = llm.generate("Say hello.", max_tokens=5, logprobs=True)
    c = gen.completions[0]
    assert c.logprobs is None or (len(c.logprobs) == len(c.tokens) and all(x <= 0 for x in c.logprobs))


def test_method_end_to_end_through_real_server(server_url, hopqa_home, demo_index):
    from hopqa.build import build_method
    from hopqa.llm import load_llm

    llm = load_llm(f"openai:smollm2@{server_url}", home=hopqa_home, cache=False)
    method = build_method("retrieve-then-read", llm, demo_index, k=3)
    ans = method.answer("Who was the first president of the association that published the Journal of "
                        "Psychotherapy Integration?")
    assert ans.error is None, ans.error
    assert len(ans.passages) == 3 and ans.usage.llm_calls == 1 and ans.usage.retrieval_calls == 1
    assert ans.trace.llm_calls()[0]["backend"].startswith("openai:smollm2@")


def test_response_format_through_real_server(server_url):
    """llama-cpp-python's server takes ``{"type": "json_object", "schema": ...}`` but refuses
    the standard ``json_schema`` form: the backend falls back to the form it takes, and the
    reply follows the schema."""
    import json

    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
              "required": ["answer", "confidence"], "additionalProperties": False}
    llm = OpenAICompatibleLLM(OpenAIConfig.parse(f"smollm2@{server_url}?retries=0"))
    for question in ("What is the capital of France?", "Who wrote Hamlet?", "Is water wet?"):
        gen = llm.generate(f"{question} Reply in JSON with your answer and confidence.", schema=schema,
                           max_tokens=80)
        assert not gen.schema_ignored
        jsonschema.validate(json.loads(gen.text), schema)
    assert llm._format == 1  # json_schema refused once, json_object kept
