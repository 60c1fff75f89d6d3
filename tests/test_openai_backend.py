"""The OpenAI-compatible backend against a local fake server that misbehaves on purpose
(``tests/fault_server.py``): retries, clear errors, no hangs, exact log-probabilities, the
concurrency bound, spec parsing."""

from __future__ import annotations

import math
import threading
import traceback

import pytest

pytest.register_assert_rewrite("fault_server")  # also loaded as a plugin below
from fault_server import ANSWERED, FAULT_KINDS  # noqa: E402

from hopqa.llm.base import LLMError, LLMSpecError, UnsupportedCapability, reply_cap
from hopqa.llm.openai import OpenAICompatibleLLM, OpenAIConfig
from hopqa.trace import Trace, step

#: The fault_server fixture (a factory of FaultServer).
pytest_plugins = ["fault_server"]

#: Longest a single call may take in these tests before it counts as a hang.
HANG_GUARD = 30.0


def make(url: str, **opts) -> OpenAICompatibleLLM:
    opts.setdefault("backoff", 0.01)
    cfg = OpenAIConfig(model="m", base_url=url, api_key="sk-secret-key", **opts)
    return OpenAICompatibleLLM(cfg)


def call_bounded(fn, timeout: float = HANG_GUARD):
    """``fn()`` in a thread; fails the test (instead of hanging it) if it does not return."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"the call did not return within {timeout} s (hang)"
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- retries and errors ---------------------------------------------------------------------
def test_retries_transient_errors_then_succeeds(fault_server):
    s = fault_server(script=["http500", "http429", "ok"])
    llm = make(s.url, retries=3)
    gen = llm.generate("Question: who wrote Hamlet")
    assert gen.text == "Hamlet" and gen.prompt_tokens == 4 and gen.completion_tokens == 1
    assert [r["kind"] for r in s.requests] == ["http500", "http429", "ok"]
    assert s.requests[0]["auth"] == "Bearer sk-secret-key"


def test_clear_error_after_last_retry(fault_server):
    s = fault_server(faults={"http500": 1.0})
    llm = make(s.url, retries=2)
    with pytest.raises(LLMError) as e:
        llm.generate("q")
    msg = str(e.value)
    assert msg.startswith(f"openai:m@{s.url}: HTTP 500 after 3 attempts (InternalServerError: ")
    assert "check that the server is running" in msg and "sk-secret-key" not in msg
    assert len(s.requests) == 3


def test_client_errors_are_not_retried(fault_server):
    s = fault_server(script=["http400"])
    llm = make(s.url, retries=3)
    with pytest.raises(LLMError) as e:
        llm.generate("q")
    assert "HTTP 400" in str(e.value) and len(s.requests) == 1


def test_timeout_is_retried(fault_server):
    # The first request never answers until released (after the call): whatever the machine's
    # load, the client's timeout fires first. Retries leave room for a slow healthy reply.
    s = fault_server(script=["hang"], hang_seconds=HANG_GUARD)
    llm = make(s.url, retries=3, timeout=1.0)
    try:
        assert llm.generate("Question: is it quick").text == "quick"
    finally:
        s.release_hangs()
    assert s.requests[0]["kind"] == "hang" and len(s.requests) >= 2


def test_empty_choices_do_not_hang_and_give_a_clear_error(fault_server):
    # Used to deadlock: the top-up of the "missing" sample re-entered the concurrency slot
    # held by the same call, once per empty reply, until no slot was left.
    s = fault_server(faults={"empty_choices": 1.0})
    llm = make(s.url, retries=1, concurrency=8)
    with pytest.raises(LLMError) as e:
        call_bounded(lambda: llm.generate("q"))
    assert str(e.value).startswith(f"openai:m@{s.url}: empty choices after 2 attempts; ")
    assert len(s.requests) == 2


def test_empty_choices_are_retried(fault_server):
    s = fault_server(script=["empty_choices", "ok"])
    llm = make(s.url, retries=1)
    assert call_bounded(lambda: llm.generate("Question: and now")).text == "now"


@pytest.mark.parametrize("concurrency", [1, 2])
def test_server_ignoring_n_is_topped_up_without_deadlock(fault_server, concurrency):
    # With concurrency=1 the old top-up through map() waited for the slot its caller held.
    s = fault_server(max_n=1)
    llm = make(s.url, concurrency=concurrency)
    gen = call_bounded(lambda: llm.generate("Question: top up", n=3, temperature=0.7, seed=10))
    assert gen.texts == ["up", "up", "up"]
    bodies = [r["body"] for r in s.requests]
    assert [b.get("n") for b in bodies] == [3, None, None]
    assert [b.get("seed") for b in bodies] == [10, 11, 12]
    assert gen.prompt_tokens == 3 * 3 and gen.completion_tokens == 3


def test_top_ups_that_return_nothing_give_up(fault_server):
    s = fault_server(max_n=1, script=["ok"], faults={"empty_choices": 1.0})
    llm = make(s.url, retries=2)
    with pytest.raises(LLMError) as e:
        call_bounded(lambda: llm.generate("q", n=4, temperature=0.7))
    assert str(e.value).startswith(f"openai:m@{s.url}: empty choices after 3 attempts")
    assert len(s.requests) == 1 + 3  # the first call, then one top-up tried retries+1 times


def test_malformed_json_is_retried(fault_server):
    s = fault_server(script=["malformed_json", "ok"])
    llm = make(s.url, retries=1)
    assert llm.generate("Question: retried").text == "retried" and len(s.requests) == 2


def test_malformed_json_error_names_the_endpoint_and_the_cause(fault_server):
    s = fault_server(faults={"malformed_json": 1.0})
    llm = make(s.url, retries=1)
    with pytest.raises(LLMError) as e:
        llm.generate("q")
    assert str(e.value).startswith(
        f"openai:m@{s.url}: malformed JSON response after 2 attempts (JSONDecodeError: Unterminated string")
    assert len(s.requests) == 2


def test_non_json_body_is_retried_then_named(fault_server):
    s = fault_server(faults={"garbage": 1.0})
    llm = make(s.url, retries=1)
    with pytest.raises(LLMError) as e:
        llm.generate("q")
    assert str(e.value).startswith(f"openai:m@{s.url}: a response that is not JSON after 2 attempts (<html>")
    assert len(s.requests) == 2


@pytest.mark.parametrize("kind", [k for k in FAULT_KINDS if k not in ANSWERED] + ["unreachable"])
def test_no_error_or_traceback_shows_url_credentials(fault_server, kind):
    s = fault_server(faults={kind: 1.0} if kind != "unreachable" else {}, hang_seconds=HANG_GUARD)
    url = s.url if kind != "unreachable" else "http://127.0.0.1:9/v1"
    llm = make(url.replace("http://", "http://alice:hunter2-secret@"), retries=1, timeout=1.0)
    try:
        with pytest.raises(LLMError) as e:
            call_bounded(lambda: llm.generate("q"))
    finally:
        s.release_hangs()
    text = "".join(traceback.format_exception(e.value))
    assert "hunter2" not in text and "alice" not in text
    assert "openai:m@http://***@127.0.0.1:" in str(e.value)
    assert llm.name.startswith("openai:m@http://***@") and "hunter2" not in str(llm.identity())


# -- replies ---------------------------------------------------------------------------------
def test_native_n_and_request_fields(fault_server):
    s = fault_server()
    llm = make(s.url)
    gen = llm.generate("Question: fields", n=3, temperature=0.7, stop=["\n"], max_tokens=9, seed=4)
    assert gen.texts == ["fields"] * 3
    body = s.requests[0]["body"]
    assert body["n"] == 3 and body["temperature"] == 0.7 and body["stop"] == ["\n"] and body["max_tokens"] == 9
    assert body["seed"] == 4 and s.requests[0]["path"] == "/v1/chat/completions" and len(s.requests) == 1


def test_chat_logprobs_exact_values(fault_server):
    s = fault_server(reply=lambda prompt: "Paris is nice")
    llm = make(s.url)
    c = llm.generate("q", logprobs=True).completions[0]
    assert s.requests[0]["body"]["logprobs"] is True
    assert c.text == "Paris is nice"
    assert c.tokens == ["Paris", " is", " nice"]
    assert c.logprobs == [-0.25, -0.5, -0.75]
    assert c.mean_prob == pytest.approx((math.exp(-0.25) + math.exp(-0.5) + math.exp(-0.75)) / 3, rel=1e-12)
    assert llm.generate("q").completions[0].logprobs is None  # not asked, not returned


@pytest.mark.parametrize(
    "context, continuation, tokens, values",
    [
        # prompt tokens: "The"(0) " capital"(1) " of"(2) " France"(3) " is"(4) " Paris"(5): -0.25 * (i + 1)
        ("The capital of France is", " Paris", [" Paris"], [-1.5]),
        ("The capital of", " France is Paris", [" France", " is", " Paris"], [-1.0, -1.25, -1.5]),
        # a token straddling the boundary (" France" starts in the context) counts as context
        ("The capital of Fr", "ance is Paris", [" is", " Paris"], [-1.25, -1.5]),
    ],
)
def test_loglikelihood_echo_exact_values(fault_server, context, continuation, tokens, values):
    s = fault_server()
    llm = make(s.url, loglikelihood=True)
    ll = llm.loglikelihood(context, continuation)
    assert ll.tokens == tokens and ll.token_logprobs == values
    assert ll.total == sum(values) and ll.mean == sum(values) / len(values)
    assert ll.prompt_tokens == 6
    req = s.requests[0]
    assert req["path"] == "/v1/completions"
    assert req["body"]["prompt"] == context + continuation
    assert (req["body"]["echo"], req["body"]["max_tokens"], req["body"]["logprobs"]) == (True, 0, 1)


def test_loglikelihood_of_the_whole_prompt_skips_the_unconditioned_first_token(fault_server):
    s = fault_server()
    llm = make(s.url, loglikelihood=True)
    ll = llm.loglikelihood("", "a b")
    assert ll.tokens == [" b"] and ll.token_logprobs == [-0.5]


def test_loglikelihood_is_retried_on_empty_choices(fault_server):
    s = fault_server(script=["empty_choices", "malformed_json", "ok"])
    llm = make(s.url, loglikelihood=True, retries=2)
    assert call_bounded(lambda: llm.loglikelihood("The capital of France is", " Paris")).total == -1.5


def test_long_reply_is_cut_to_the_cap(fault_server):
    s = fault_server(faults={"long": 1.0}, long_chars=100_000)
    llm = make(s.url)
    trace = Trace(question="q")
    with trace.activate(), step("gen") as st:
        gen = llm.generate("Question: how long", max_tokens=32, logprobs=True)
    c = gen.completions[0]
    cap = reply_cap(32)
    assert cap == 2000 and len(c.text) == cap and c.text.startswith("long lorem ipsum")
    assert c.truncated and c.finish_reason == "length"
    assert "".join(c.tokens) == c.text[: len("".join(c.tokens))] and len("".join(c.tokens)) > cap - 10
    assert len(c.logprobs) == len(c.tokens)
    assert st.events == [{"message": "LLM reply truncated", "backend": llm.name, "chars": [100_000], "cap": cap,
                          "max_tokens": 32}]


def test_concurrency_bound_is_reached_and_never_exceeded(fault_server):
    # The server holds each request until two are in flight together: the bound is reached
    # for sure (no timing luck), and a third concurrent request would show in max_in_flight.
    s = fault_server(gate=threading.Barrier(2))
    llm = make(s.url, concurrency=2, timeout=20)
    from hopqa.llm.base import GenerationRequest

    out = call_bounded(lambda: llm.map([GenerationRequest.make(f"Question: number q{i}") for i in range(6)],
                                       workers=8))
    assert [g.text for g in out] == [f"q{i}" for i in range(6)]
    assert s.max_in_flight == 2


def test_loglikelihood_needs_to_be_enabled(fault_server):
    llm = make(fault_server().url)
    with pytest.raises(UnsupportedCapability) as e:
        llm.loglikelihood("a", "b")
    assert "loglikelihood=echo" in str(e.value)


def test_unreachable_server_gives_clear_error():
    llm = make("http://127.0.0.1:9/v1", retries=1, timeout=1)
    with pytest.raises(LLMError) as e:
        llm.generate("q")
    assert str(e.value).startswith("openai:m@http://127.0.0.1:9/v1: cannot connect to the server after 2 attempts")
    assert "check that the server is running" in str(e.value)


# -- spec parsing ----------------------------------------------------------------------------
def test_spec_parsing():
    cfg = OpenAIConfig.parse("qwen@http://localhost:8000/v1?concurrency=3&retries=1&loglikelihood=echo&n=split"
                             "&timeout=2.5&backoff=0&logprobs=0")
    assert (cfg.model, cfg.base_url, cfg.concurrency, cfg.retries, cfg.loglikelihood, cfg.native_n) == (
        "qwen", "http://localhost:8000/v1", 3, 1, True, False)
    assert (cfg.timeout, cfg.backoff, cfg.logprobs) == (2.5, 0.0, False)
    assert OpenAIConfig.parse("gpt-4o-mini").base_url is None


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("m@http://x/v1?timeout=abc", "bad value 'abc' for the LLM option 'timeout': use timeout=SECONDS"),
        ("m@http://x/v1?retries=x", "bad value 'x' for the LLM option 'retries': use retries=N"),
        ("m@http://x/v1?retries=2&retires=3",
         "unknown option 'retires' (did you mean 'retries'?); known options: concurrency, timeout, retries"),
        ("m@http://x/v1?bogus=1", "unknown option 'bogus'; known options: concurrency"),
        ("m@http://x/v1?native_n=0", "unknown option 'native_n'; known options: concurrency"),  # a field, not an option
        ("m@http://x/v1?bogus=1", "(as in openai:MODEL@http://host:port/v1[?option=value&...])"),
        ("m@http://x/v1?timeout=0", "bad value '0' for the LLM option 'timeout': use timeout=SECONDS (per request, a number > 0)"),
        ("m@http://x/v1?timeout=inf", "bad value 'inf' for the LLM option 'timeout'"),
        ("m@http://x/v1?concurrency=2.5", "bad value '2.5' for the LLM option 'concurrency'"),
        ("m@http://x/v1?n=1", "bad value '1' for the LLM option 'n': use n=native|split"),  # not a number of samples
        ("m@http://x/v1?concurrency=-2", "bad value '-2' for the LLM option 'concurrency'"),
        ("m@http://x/v1?concurrency=0", "bad value '0' for the LLM option 'concurrency'"),
        ("m@http://x/v1?timeout=-1", "bad value '-1' for the LLM option 'timeout'"),
        ("m@http://x/v1?timeout=nan", "bad value 'nan' for the LLM option 'timeout'"),
        ("m@http://x/v1?retries=-1", "bad value '-1' for the LLM option 'retries'"),
        ("m@http://x/v1?backoff=-0.5", "bad value '-0.5' for the LLM option 'backoff'"),
        ("m@http://x/v1?n=many", "bad value 'many' for the LLM option 'n': use n=native|split"),
        ("m@http://x/v1?logprobs=maybe", "bad value 'maybe' for the LLM option 'logprobs': use logprobs=1|0"),
        ("m@http://x/v1?loglikelihood=yes-please", "use loglikelihood=echo|0"),
        ("m@http://x/v1?timeout", "the LLM option 'timeout' has no value: use timeout=SECONDS"),
        ("m@http://x/v1?timeout=", "the LLM option 'timeout' has no value"),
        ("@http://x", "needs a model name: openai:MODEL@http://host:port/v1"),
        ("m@localhost:8000/v1",
         "the endpoint 'localhost:8000/v1' after 'm@' is not an http(s) URL: use openai:MODEL@http://host:port/v1"),
        ("m@", "the endpoint '' after 'm@' is not an http(s) URL"),
        ("m@ftp://u:pw@host/v1", "the endpoint 'ftp://***@host/v1'"),
    ],
)
def test_bad_specs_give_one_line_errors(spec, expected):
    with pytest.raises(LLMSpecError) as e:
        OpenAIConfig.parse(spec)
    msg = str(e.value)
    assert isinstance(e.value, ValueError) and expected in msg and "\n" not in msg and "pw" not in msg


def test_bad_settings_are_errors_not_clamped():
    with pytest.raises(LLMSpecError):
        OpenAIConfig(model="m", concurrency=-1)
    with pytest.raises(LLMSpecError):
        OpenAIConfig(model="m", retries=-3)
    with pytest.raises(LLMSpecError):
        OpenAIConfig(model="m", timeout=0)
    for settings, message in [
        ({"concurrency": 0}, "OpenAIConfig: option concurrency must be at least 1, not 0"),
        ({"timeout": -1.0}, "option timeout must be greater than 0, not -1.0"),
        ({"timeout": float("nan")}, "option timeout must be a finite number"),
        ({"backoff": -0.5}, "option backoff must be at least 0, not -0.5"),
        ({"concurrency": "8"}, "option concurrency must be a whole number, not '8'"),
        ({"logprobs": 1}, "option logprobs must be true or false, not 1"),
    ]:
        with pytest.raises(LLMSpecError) as e:
            OpenAIConfig(model="m", **settings)
        assert message in str(e.value)
    with pytest.raises(LLMSpecError) as e:
        OpenAIConfig(model="m", api_key=12345)  # the key is never shown
    assert "api_key" in str(e.value) and "12345" not in str(e.value)
    assert OpenAIConfig(model="m", timeout=0.5, backoff=0, retries=0, concurrency=1).timeout == 0.5


def test_sdk_is_imported_on_the_first_request_only(fault_server, tmp_path):
    """A run answered from the response cache never imports the OpenAI SDK (~0.3-0.8 s)."""
    import subprocess
    import sys

    s = fault_server(reply=lambda prompt: "Paris")
    code = (
        "import sys\n"
        "from hopqa.llm import load_llm\n"
        f"llm = load_llm({'openai:m@' + s.url!r}, home={str(tmp_path)!r})\n"
        "before = 'openai' in sys.modules\n"
        "text = llm.generate('Question: capital of France').text\n"
        "print(before, 'openai' in sys.modules, text)\n"
        "llm.close()\n"
        f"llm = load_llm({'openai:m@' + s.url!r}, home={str(tmp_path)!r})\n"
        "print(llm.generate('Question: capital of France').text, 'openai' in sys.modules)\n"
    )
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "False True Paris"  # built without the SDK; the request imported it
    assert len(s.requests) == 1  # the second answer came from the cache
    again = subprocess.run([sys.executable, "-c", code.split("llm.close()\n")[1].replace(
        "llm = load_llm", "import sys\nfrom hopqa.llm import load_llm\nllm = load_llm", 1)],
        capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "Paris False"  # a cached answer in a new process: no SDK
    assert len(s.requests) == 1
