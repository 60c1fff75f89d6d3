"""Bad input to the ``hopqa`` command: exit code 2 and one ``hopqa: error: ...`` line on stderr.

Every case runs ``python -m hopqa.cli`` in a subprocess with its own ``--home`` (never
``~/.cache/hopqa``) and ``$HOPQA_LLM`` pointing at a closed port, so a case that got past
validation by mistake fails fast (exit 1) instead of loading a model. Each case is checked for:
exit code 2, nothing on stdout, exactly one line shown on stderr, starting ``hopqa: error:``
with the expected text (a progress bar that cleared itself is not a line), no traceback, and
nothing built in the home (validation comes before any index is built or model loaded). The
cases run concurrently (a few at a time) in one fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: An LLM nobody answers: anything that reaches a model call fails at once with exit 1.
CLOSED = "openai:nobody@http://127.0.0.1:9/v1?retries=0&timeout=2"
Q = "Who directed Titanic?"
#: Truncated one at a time here (every file of an index is truncated in test_retrieval.py).
INDEX_FILES = ["data.csc.index.npy", "vocab.index.json", "passages.jsonl", "meta.json"]
RUN = "musique-dev-distractor/direct"  # where `eval --dataset musique --method direct` writes
EVAL = ["eval", "--dataset", "musique", "--method", "direct", "--limit", "1", "--no-progress"]


@dataclass
class Case:
    """One bad command line: its arguments (``{tmp}`` is the shared fixture directory) and the
    texts its error line must contain."""

    id: str
    args: list[str]
    expect: list[str]
    env: dict[str, str] = field(default_factory=dict)
    home: bool = True  # pass --home (not for errors before the subcommand)


CASES = [
    # hopqa ask: the question
    Case("ask-empty", ["ask", ""], ["the question is empty"]),
    Case("ask-too-long", ["ask", "why " * 1001], ["the question is 4003 characters long; the limit is 4000"]),
    # the method and its options
    Case("ask-unknown-method", ["ask", Q, "--method", "nope"], ["unknown method 'nope'", "retrieve-then-read"]),
    Case("ask-set-unknown-key", ["ask", Q, "--set", "bogus=1"], ["--set expects KEY=VALUE with KEY one of: k,"]),
    Case("ask-set-no-value", ["ask", Q, "--set", "k"], ["--set expects KEY=VALUE"]),
    Case("ask-set-not-a-number", ["ask", Q, "--set", "k=abc"], ["--set k=abc: option k must be a whole number"]),
    Case("ask-set-k-negative", ["ask", Q, "--set", "k=-3"], ["--set k=-3: option k must be at least 1, not -3"]),
    Case("ask-set-max-tokens", ["ask", Q, "--method", "direct", "--set", "max_tokens=-5"],
         ["--set max_tokens=-5: option max_tokens must be at least 1"]),
    Case("ask-set-temperature", ["ask", Q, "--method", "direct", "--set", "temperature=7"],
         ["option temperature must be between 0.0 and 2.0, not 7.0"]),
    Case("ask-set-nan", ["ask", Q, "--method", "direct", "--set", "temperature=nan"],
         ["option temperature must be a finite number"]),
    Case("ask-set-bool", ["ask", Q, "--method", "hgot", "--set", "rewrite=maybe"],
         ["option rewrite must be true or false, not 'maybe'"]),
    Case("ask-set-probability", ["ask", Q, "--method", "self-dc", "--set", "beta=1.5"],
         ["option beta must be between 0.0 and 1.0"]),
    Case("ask-set-rerank-unknown", ["ask", Q, "--method", "leapquery", "--set", "rerank=bogus"],
         ["rerank=bogus: unknown reranker 'bogus'", "hybrid"]),
    Case("eval-set-rerank-unknown", [*EVAL[:4], "leapquery", *EVAL[5:], "--set", "rerank=bi-encodr"],
         ["rerank=bi-encodr: unknown reranker 'bi-encodr' (did you mean 'bi-encoder'?)"]),
    Case("ask-k-zero", ["ask", Q, "--k", "0"], ["argument --k: expected a whole number of at least 1, not '0'",
                                               "(see: hopqa ask --help)"]),
    Case("ask-k-negative", ["ask", Q, "--k", "-1"], ["argument --k: expected a whole number of at least 1"]),
    Case("ask-blank", ["ask", "  ", " "], ["the question is empty"]),
    Case("ask-k-text", ["ask", Q, "--k", "five"], ["argument --k: expected a whole number of at least 1, not 'five'"]),
    # the LLM specs
    Case("ask-llm-unknown-backend", ["ask", Q, "--llm", "foo:bar"], ["--llm foo:bar: unknown LLM backend 'foo'"]),
    Case("ask-llm-option-typo", ["ask", Q, "--llm", "openai:m@http://x/v1?retires=3"],
         ["--llm openai:m@http://x/v1?retires=3:", "retires"]),
    Case("ask-llm-bad-timeout", ["ask", Q, "--llm", "openai:m@http://x/v1?timeout=abc"], ["--llm", "timeout", "abc"]),
    Case("ask-llm-embedded-option", ["ask", Q, "--llm", "embedded:qwen2.5-1.5b?n_ctx=big"], ["--llm", "n_ctx", "big"]),
    Case("ask-llm-credentials-redacted", ["ask", Q, "--llm", "openai:m@http://me:s3cret@x/v1?bogus=1"],
         ["--llm openai:m@http://***@x/v1?bogus=1:"]),
    Case("ask-llm-from-env", ["ask", Q], ["$HOPQA_LLM foo:bar: unknown LLM backend 'foo'"],
         env={"HOPQA_LLM": "foo:bar"}),
    Case("ask-scorer-llm", ["ask", Q, "--method", "gensco-max", "--scorer-llm", "openai:m@http://x/v1?n=2&x=1"],
         ["--scorer-llm openai:m@http://x/v1?n=2&x=1:"]),
    Case("ask-unknown-embedded-model", ["ask", Q, "--method", "direct", "--llm", "embedded:no-such-model"],
         ["unknown embedded model 'no-such-model'"]),
    # files
    Case("ask-missing-corpus", ["ask", Q, "--corpus", "{tmp}/missing.jsonl"], ["no corpus file at {tmp}/missing.jsonl"]),
    Case("ask-empty-corpus", ["ask", Q, "--corpus", "{tmp}/empty.jsonl"],
         ["{tmp}/empty.jsonl: cannot build a BM25 index over an empty corpus"]),
    Case("ask-missing-index", ["ask", Q, "--index", "{tmp}/no-index"], ["no index directory at {tmp}/no-index"]),
    Case("ask-index-dir-without-index", ["ask", Q, "--index", "{tmp}"], ["no index in {tmp}"]),
    *[Case(f"ask-damaged-index-{name}", ["ask", Q, "--index", f"{{tmp}}/damaged/{name}"],
           [f"index at {{tmp}}/damaged/{name} is damaged ({name}",
            "rebuild it with: hopqa index " + ("CORPUS" if name == "meta.json" else "{tmp}/corpus.jsonl")
            + f" --out {{tmp}}/damaged/{name}"])
      for name in INDEX_FILES],
    # search choices
    Case("ask-retriever-unknown", ["ask", Q, "--retriever", "sparse"], ["argument --retriever: invalid choice: 'sparse'"]),
    Case("ask-rerank-unknown", ["ask", Q, "--rerank", "cross"], ["argument --rerank: unknown reranker 'cross'"]),
    Case("ask-rerank-depth-zero", ["ask", Q, "--rerank-depth", "0"],
         ["argument --rerank-depth: expected a whole number of at least 1"]),
    Case("ask-index-milvus-bad-uri", ["ask", Q, "--index", "milvus://127.0.0.1:1"],
         ["not a Milvus collection URI: 'milvus://127.0.0.1:1'"]),
    Case("ask-index-milvus-unreachable", ["ask", Q, "--index", "milvus://127.0.0.1:1/corpus"],
         ["cannot reach Milvus at http://127.0.0.1:1"]),
    Case("ask-index-with-another-corpus", ["ask", Q, "--index", "{tmp}/index", "--corpus", "{tmp}/other.jsonl"],
         ["the index in {tmp}/index was built from {tmp}/corpus.jsonl, not from the content of {tmp}/other.jsonl"]),
    Case("eval-retriever-distractor", [*EVAL, "--retriever", "hybrid"],
         ["distractor setting searches each question's own paragraphs"]),
    Case("index-milvus-out-dir", ["index", "{tmp}/corpus.jsonl", "--out", "{tmp}/out", "--engine", "milvus"],
         ["--out is then milvus://HOST:PORT/COLLECTION"]),
    # hopqa eval
    Case("eval-workers-zero", [*EVAL, "--workers", "0"], ["argument --workers: expected a whole number of at least 1"]),
    Case("eval-workers-negative", [*EVAL, "--workers", "-3"], ["argument --workers: expected a whole number"]),
    Case("eval-k-zero", [*EVAL, "--k", "0"], ["argument --k: expected a whole number of at least 1"]),
    Case("eval-limit-zero", [*EVAL, "--limit", "0"], ["argument --limit: expected a whole number of at least 1"]),
    Case("eval-skip-negative", [*EVAL, "--skip", "-1"], ["argument --skip: expected a whole number of at least 0"]),
    Case("eval-set-k", ["eval", "--dataset", "musique", "--method", "retrieve-then-read", "--set", "k=-3"],
         ["--set k=-3: option k must be at least 1"]),
    Case("eval-unknown-dataset", ["eval", "--dataset", "nope", "--method", "direct"], ["unknown dataset 'nope'"]),
    Case("eval-missing-dataset-file", ["eval", "--dataset", "{tmp}/nope.jsonl", "--method", "direct"],
         ["{tmp}/nope.jsonl"]),
    Case("eval-unknown-method", ["eval", "--dataset", "musique", "--method", "direct,nope"], ["unknown method 'nope'"]),
    Case("eval-no-method", ["eval", "--dataset", "musique", "--method", ","], ["--method names no method"]),
    Case("eval-bad-setting", [*EVAL, "--setting", "closed"], ["--setting must be one of distractor, open"]),
    Case("eval-bad-llm", [*EVAL, "--llm", "foo:bar"], ["--llm foo:bar: unknown LLM backend"]),
    Case("eval-bad-judge", [*EVAL, "--judge", "openai:m@http://x/v1?timeout=abc"], ["--judge", "timeout"]),
    Case("eval-bad-judge-from-env", EVAL, ["$HOPQA_JUDGE foo:bar"], env={"HOPQA_JUDGE": "foo:bar"}),
    Case("eval-empty-config", [*EVAL, "--out", "{tmp}/runs-empty"],
         ["{tmp}/runs-empty/" + RUN + "/config.json is damaged (it is empty): delete it", "another --out"]),
    Case("eval-half-written-config", [*EVAL, "--out", "{tmp}/runs-half"],
         ["{tmp}/runs-half/" + RUN + "/config.json is damaged (it is not valid JSON"]),
    Case("eval-other-config", [*EVAL, "--out", "{tmp}/runs-other"],
         ["holds a run with a different configuration (differs in:", "dataset"]),
    Case("eval-damaged-index", ["eval", "--dataset", "musique", "--method", "retrieve-then-read", "--setting", "open",
                                "--limit", "1", "--index", "{tmp}/damaged/passages.jsonl"],
         ["index at {tmp}/damaged/passages.jsonl is damaged (passages.jsonl"]),
    # hopqa index, report, datasets
    Case("index-missing-corpus", ["index", "{tmp}/missing.jsonl", "--out", "{tmp}/out"], ["no corpus file at"]),
    Case("index-empty-corpus", ["index", "{tmp}/empty.jsonl", "--out", "{tmp}/out"],
         ["{tmp}/empty.jsonl: cannot build a BM25 index over an empty corpus"]),
    Case("index-k1-negative", ["index", "{tmp}/corpus.jsonl", "--out", "{tmp}/out", "--k1", "-1"],
         ["argument --k1: expected a number of at least 0"]),
    Case("index-b-too-big", ["index", "{tmp}/corpus.jsonl", "--out", "{tmp}/out", "--b", "2"],
         ["argument --b: expected a number between 0 and 1, not '2'"]),
    Case("report-missing-run", ["report", "{tmp}/no-runs"], ["no run directory at {tmp}/no-runs"]),
    Case("report-bad-percentile", ["report", "{tmp}", "--long-pct", "101"], ["argument --long-pct"]),
    Case("report-short-above-long", ["report", "{tmp}", "--short-pct", "60", "--long-pct", "40"],
         ["--short-pct (60.0) must not be above --long-pct (40.0)"]),
    Case("datasets-unknown", ["datasets", "download", "nope"], ["unknown dataset"]),
    Case("datasets-timeout", ["datasets", "download", "bamboogle", "--timeout", "0"],
         ["argument --timeout: expected a number above 0"]),
    # the command line itself
    Case("no-command", [], ["the following arguments are required: command"], home=False),
    Case("unknown-command", ["frobnicate"], ["invalid choice: 'frobnicate'"], home=False),
    Case("unknown-option", ["ask", Q, "--frobnicate"], ["unrecognized arguments: --frobnicate"]),
    Case("missing-required", ["eval", "--method", "direct"], ["the following arguments are required: --dataset"]),
]


def shown(stderr: str) -> list[str]:
    """The lines a terminal shows of ``stderr``: of each line what follows its last carriage
    return (a progress bar redraws itself after one, and clears itself with one), blank ones left out."""
    return [seg for line in stderr.split("\n") if (seg := line.rsplit("\r", 1)[-1].strip())]


def _prepare(tmp: Path) -> None:
    """The files the cases refer to: a corpus, an empty one, damaged copies of an index (one file
    truncated in each), run directories with a damaged or different config.json."""
    import shutil

    from hopqa.retrieval.bm25 import build_index

    corpus = tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "title": t, "text": x}) + "\n" for i, (t, x) in enumerate([
        ("Titanic (1997 film)", "Titanic is a 1997 film directed by James Cameron."),
        ("Paris", "Paris is the capital of France.")])))
    (tmp / "empty.jsonl").write_text("")
    (tmp / "other.jsonl").write_text(json.dumps({"id": "9", "title": "Oslo", "text": "Oslo is in Norway."}) + "\n")
    build_index(corpus, tmp / "index", progress=False)
    for name in INDEX_FILES:
        damaged = tmp / "damaged" / name
        shutil.copytree(tmp / "index", damaged)
        (damaged / name).write_bytes((damaged / name).read_bytes()[: (damaged / name).stat().st_size // 2])
    for out, content in [("runs-empty", ""), ("runs-half", '{"dataset": "musique", "spl'),
                         ("runs-other", json.dumps({"dataset": "hotpotqa"}))]:
        run = tmp / out / RUN
        run.mkdir(parents=True)
        (run / "config.json").write_text(content)


def _run(case: Case, tmp: Path) -> subprocess.CompletedProcess:
    home = tmp / "homes" / case.id
    args = [a.replace("{tmp}", str(tmp)) for a in case.args] + (["--home", str(home)] if case.home else [])
    env = {k: v for k, v in os.environ.items() if k not in ("HOPQA_DATA_DIR", "HOPQA_JUDGE", "OPENAI_API_KEY")}
    env.update({"HOPQA_HOME": str(home), "HOPQA_LLM": CLOSED, **case.env})
    r = subprocess.run([sys.executable, "-m", "hopqa.cli", *args], capture_output=True, env=env, timeout=120, cwd=tmp,
                       check=False)
    # decoded by hand: text=True would turn the progress bars' carriage returns into newlines
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    tmp = tmp_path_factory.mktemp("bad-input")
    _prepare(tmp)
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = dict(zip((c.id for c in CASES), pool.map(lambda c: _run(c, tmp), CASES)))
    return tmp, done


def test_case_ids_are_unique():
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_error_line_and_exit_2(results, case):
    tmp, done = results
    r = done[case.id]
    assert "Traceback" not in r.stderr, r.stderr
    lines = shown(r.stderr)
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("hopqa: error: "), r.stderr
    assert r.stderr.endswith(lines[0] + "\n") and r.stderr.count("hopqa: error:") == 1
    for text in case.expect:
        assert text.replace("{tmp}", str(tmp)) in lines[0]
    assert r.stdout == ""
    home = tmp / "homes" / case.id
    assert not (home / "demo").exists() and not (home / "indexes").exists()  # no index was built
    assert not (home / "cache").exists()  # no LLM was loaded


def test_nothing_was_written_into_damaged_run_directories(results):
    tmp, _ = results
    for out in ("runs-empty", "runs-half", "runs-other"):
        assert sorted(p.name for p in (tmp / out / RUN).iterdir()) == ["config.json"]


# -- the one place method options are checked (hopqa.methods.base), in-process --------------------
def test_every_numeric_option_of_every_method_has_a_deliberate_range():
    """A new numeric option must be added to OPTION_RANGES (or carry metadata={"range": ...});
    every default passes its check (building each default config runs it)."""
    import dataclasses

    from hopqa.methods.base import METHODS, OPTION_RANGES, method_config, option_range
    from hopqa.options import field_kind

    for name in METHODS:
        cls = METHODS[name]
        config = method_config(name)  # __post_init__ checks every default
        for f in dataclasses.fields(config):
            if field_kind(cls.Config, f.name) in ("int", "float"):
                assert option_range(cls.Config, f.name) is not None, f"{name}.{f.name} has no range in OPTION_RANGES"
    assert all(low is None or high is None or low <= high for low, high in OPTION_RANGES.values())


@pytest.mark.parametrize("method,options,message", [
    ("retrieve-then-read", {"k": 0}, "option k must be at least 1, not 0"),
    ("retrieve-then-read", {"k": "3"}, "option k must be a whole number, not '3'"),
    ("retrieve-then-read", {"k": 2.0}, "option k must be a whole number"),
    ("retrieve-then-read", {"k": True}, "option k must be a whole number"),
    ("direct", {"max_tokens": -5}, "option max_tokens must be at least 1"),
    ("direct", {"temperature": float("inf")}, "option temperature must be a finite number"),
    ("self-dc", {"top_p": 1.5}, "option top_p must be between 0.0 and 1.0"),
    ("self-dc", {"alpha": -0.1}, "option alpha must be between 0.0 and 1.0"),
    ("hgot", {"samples": 0}, "option samples must be at least 1"),
    ("hgot", {"depth": -1}, "option depth must be at least 0"),
    ("hgot", {"rewrite": "yes"}, "option rewrite must be true or false"),
    ("hgot", {"demo_cache": 3}, "option demo_cache must be text"),
    ("ircot", {"shots": -1}, "option shots must be at least 0"),
    ("iter-retgen", {"iterations": 0}, "option iterations must be at least 1"),
    ("direct", {"bogus": 1}, "DirectConfig: unknown option 'bogus'"),
])
def test_build_method_refuses_bad_options(method, options, message):
    from hopqa.build import build_method
    from hopqa.llm.scripted import ScriptedLLM
    from hopqa.methods.base import MethodError

    with pytest.raises(MethodError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_method(method, ScriptedLLM(), **options)


def test_limits_that_may_be_zero_and_optional_values_are_accepted():
    from hopqa.build import build_method
    from hopqa.llm.scripted import ScriptedLLM

    assert build_method("hgot", ScriptedLLM(), depth=0, num_demos=0).config.depth == 0
    assert build_method("ircot", ScriptedLLM(), shots=0).config.shots == 0
    assert build_method("self-dc", ScriptedLLM(), alpha=1.0, beta=0.0, temperature=0, top_p=1).config.alpha == 1.0


def test_configs_are_checked_when_made_and_update_is_all_or_nothing():
    from hopqa.methods.base import MethodError
    from hopqa.methods.retrieve_read import RetrieveReadConfig

    with pytest.raises(MethodError, match="option k must be at least 1"):
        RetrieveReadConfig(k=0)
    config = RetrieveReadConfig()
    with pytest.raises(MethodError, match="max_tokens"):
        config.update(k=2, max_tokens=0)
    assert config.k == 5  # nothing was set
    assert config.update(k=2, max_tokens=None).k == 2  # None means: leave as it is


def test_parse_option_converts_text_to_the_field_type():
    from hopqa.methods.base import MethodError, parse_option
    from hopqa.methods.hgot import HGOTConfig
    from hopqa.methods.self_dc import SelfDCConfig

    assert parse_option(HGOTConfig, "k", " 3 ") == 3
    assert parse_option(HGOTConfig, "temperature", "0.5") == 0.5
    assert parse_option(HGOTConfig, "rewrite", "OFF") is False and parse_option(HGOTConfig, "rewrite", "yes") is True
    assert parse_option(HGOTConfig, "demo_cache", " /tmp/x ") == " /tmp/x "  # text is kept as given
    assert parse_option(SelfDCConfig, "alpha", "none") is None and parse_option(SelfDCConfig, "alpha", "0.4") == 0.4
    for bad, message in [("3.5", "whole number"), ("", "whole number"), ("-2", "at least 1")]:
        with pytest.raises(MethodError, match=message):
            parse_option(HGOTConfig, "k", bad)
    with pytest.raises(MethodError, match="option alpha must be a number, not 'high'"):
        parse_option(SelfDCConfig, "alpha", "high")


def test_a_field_can_declare_its_own_range():
    import dataclasses

    from hopqa.methods.base import MethodConfig, MethodError

    @dataclasses.dataclass
    class Custom(MethodConfig):
        k: int = dataclasses.field(default=3, metadata={"range": (2, 4)})  # overrides OPTION_RANGES
        rounds: int = 1  # in no table: whole numbers >= 0

    assert Custom().update(k=4, rounds=0).k == 4
    with pytest.raises(MethodError, match="option k must be between 2 and 4, not 5"):
        Custom(k=5)
    with pytest.raises(MethodError, match="option rounds must be at least 0"):
        Custom(rounds=-1)
