"""The hopqa command as a user runs it (subprocesses, a private HOPQA_HOME)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SMOL = "embedded:smollm2-135m"
QUESTION = "Who is the director of the film that won Best Picture at the 1998 Oscars?"


def hopqa(*args: str, home: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOPQA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "hopqa.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def corpus(tmp_path) -> Path:
    p = tmp_path / "corpus.jsonl"
    rows = [
        {"id": "1", "title": "Titanic (1997 film)", "text": "Titanic is a 1997 American film directed by James Cameron. "
         "It won the Academy Award for Best Picture at the 70th Academy Awards in 1998."},
        {"id": "2", "title": "James Cameron", "text": "James Cameron is a Canadian filmmaker."},
        {"id": "3", "title": "Paris", "text": "Paris is the capital of France."},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken line\n")
    return p


def test_usage_errors_exit_2(tmp_path):
    r = hopqa("ask", "", home=tmp_path)
    assert r.returncode == 2 and "question is empty" in r.stderr
    r = hopqa("ask", "hi", "--method", "nope", home=tmp_path)
    assert r.returncode == 2 and "unknown method" in r.stderr and "retrieve-then-read" in r.stderr
    r = hopqa("ask", "hi", "--corpus", str(tmp_path / "missing.jsonl"), home=tmp_path)
    assert r.returncode == 2 and "no corpus file" in r.stderr
    r = hopqa("ask", "hi", "--set", "bogus=1", home=tmp_path)
    assert r.returncode == 2 and "--set expects" in r.stderr
    r = hopqa("ask", "hi", "--llm", "embedded:no-such-model", "--method", "direct", home=tmp_path)
    assert r.returncode == 2 and "unknown embedded model" in r.stderr


def test_datasets_lists_every_dataset_with_its_source(tmp_path):
    env_free = {k: v for k, v in os.environ.items() if k != "HOPQA_DATA_DIR"}
    mine = tmp_path / "mine" / "bamboogle"
    mine.mkdir(parents=True)
    (mine / "bamboogle_125.csv").write_text("Who?,x,y,z,Me\nWhere?,x,y,z,Here\n")
    r = subprocess.run([sys.executable, "-m", "hopqa.cli", "datasets", "--data-dir", str(tmp_path / "mine")],
                       capture_output=True, text=True, env={**env_free, "HOPQA_HOME": str(tmp_path)}, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = {tuple(line.split()[:2]): line.split() for line in r.stdout.splitlines() if line.startswith("  ")}
    for name in ["musique", "hotpotqa", "2wikimultihopqa", "adversarial_hotpotqa", "bamboogle", "freshqa",
                 "fever", "open_squad"]:
        assert any(key[0] == name for key in rows)
    assert rows[("musique", "dev")][2:] == ["200", "shipped"]
    assert rows[("bamboogle", "test")][2:] == ["2", "data-dir"]  # the user's folder comes first
    assert "downloaded" in r.stdout and str(tmp_path / "datasets") in r.stdout


def test_datasets_download_errors(tmp_path):
    r = hopqa("datasets", "download", "bamboogle", "--to", str(tmp_path / "dl"), "--timeout", "5", home=tmp_path)
    assert r.returncode == 1 and "no network" in r.stderr  # this machine has no internet
    assert not list((tmp_path / "dl").rglob("*.part"))  # nothing half-written is left
    r = hopqa("datasets", "download", "nope", home=tmp_path)
    assert r.returncode == 2 and "unknown dataset" in r.stderr
    r = hopqa("datasets", "download", "adversarial_hotpotqa", home=tmp_path)
    assert r.returncode == 2 and "no official download" in r.stderr
    r = hopqa("datasets", "download", home=tmp_path)
    assert r.returncode == 2 and "NAME is one of" in r.stderr


def test_methods_lists_options(tmp_path):
    r = hopqa("methods", home=tmp_path)
    assert r.returncode == 0 and "retrieve-then-read" in r.stdout and "k=5" in r.stdout


def test_index_command(tmp_path, corpus):
    r = hopqa("index", str(corpus), "--out", str(tmp_path / "idx"), home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "indexed 3 passages" in r.stdout
    assert "corpus.jsonl:4" in r.stderr  # the malformed line is reported, not fatal


def test_warnings_are_one_line_each_above_the_progress_bars(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b'{"id": "1", "text": "Paris is in France"}\n{broken\n{"id": "3", "text": "caf\xe9 Lyon"}\n'
                       b'{"id": "4", "text": "\xff again"}\n')
    r = hopqa("index", str(corpus), "--out", str(tmp_path / "idx"), home=tmp_path)
    assert r.returncode == 0, r.stderr
    # what a terminal shows of each stderr line is what follows its last carriage return: tqdm.write
    # clears the bar, prints the warning on a line of its own and redraws the bar below it
    shown = [line.rsplit("\r", 1)[-1] for line in r.stderr.split("\n")]
    assert [line for line in shown if "warning" in line.lower()] == [
        (f"hopqa: warning: {corpus}:2: skipped (malformed JSON line (not JSON: Expecting property name enclosed "
         "in double quotes))"),
        (f"hopqa: warning: {corpus}:3: invalid UTF-8, read as U+FFFD; later invalid lines of this file are read "
         "the same way without a warning"),
    ]
    assert "warnings.warn" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_ask_prints_answer_passages_and_cost(tmp_path, corpus):
    r = hopqa("ask", QUESTION, "--method", "retrieve-then-read", "--llm", SMOL, "--corpus", str(corpus), "--k", "2",
              home=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == f"Question: {QUESTION}" and out[1] == f"Method: retrieve-then-read ({SMOL})"
    assert out[2].startswith("Answer: ") and out[3] == "Passages:"
    assert out[4].startswith("  [1] Titanic (1997 film): Titanic is a 1997")
    assert out[-1].startswith("Cost: 1 LLM calls (0 cached)") and "1 retrieval calls" in out[-1]
    # the second run is answered from the cache; --quiet prints the answer alone
    again = hopqa("ask", QUESTION, "--method", "retrieve-then-read", "--llm", SMOL, "--corpus", str(corpus),
                  "--k", "2", home=tmp_path)
    assert "Cost: 1 LLM calls (1 cached), 0 prompt + 0 completion tokens" in again.stdout
    quiet = hopqa("ask", QUESTION, "--method", "retrieve-then-read", "--llm", SMOL, "--corpus", str(corpus),
                  "--k", "2", "--quiet", home=tmp_path)
    assert quiet.returncode == 0 and quiet.stdout == out[2].removeprefix("Answer: ") + "\n"
    fresh = hopqa("ask", QUESTION, "--method", "retrieve-then-read", "--llm", SMOL, "--corpus", str(corpus), "--k",
                  "2", "--no-cache", home=tmp_path)
    assert "(0 cached)" in fresh.stdout


@pytest.mark.slow
@pytest.mark.parametrize("method,options", [("iter-retgen", ["--set", "iterations=2"]), ("ircot", [])])
def test_ask_shows_each_hop_with_its_answer_and_passages(tmp_path, corpus, method, options):
    args = ["ask", QUESTION, "--method", method, *options, "--llm", SMOL, "--corpus", str(corpus), "--k", "2"]
    r = hopqa(*args, "--json", home=tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    text = hopqa(*args, home=tmp_path).stdout  # the same calls, from the cache
    from hopqa.console import wrap

    lines = text.splitlines()
    assert result["hops"] and lines[1] == f"Method: {method} ({SMOL})"
    at = len(wrap(QUESTION, "Question: ", " " * 10)) + 1
    for n, hop in enumerate(result["hops"], 1):
        expected = wrap(hop["question"], f"{n:>2}. {hop['label']}: ", "    ")
        if hop["answer"]:
            expected += wrap(hop["answer"], "    -> ", "       ")
        assert lines[at:at + len(expected)] == expected
        at += len(expected)
        if hop["passages"]:
            assert lines[at].startswith("    passages: " + hop["passages"][0]["title"])
            at += 1
    assert lines[at] == f"Answer: {result['answer']}"
    assert lines[at + 1].startswith(f"Read from {len(result['passages'])} passage")


@pytest.mark.slow
def test_ask_json_has_trace_and_usage(tmp_path, corpus):
    r = hopqa("ask", QUESTION, "--llm", SMOL, "--corpus", str(corpus), "--method", "genread", "--json",
              home=tmp_path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["method"] == "genread" and d["answer"] and d["error"] is None
    assert d["usage"]["llm_calls"] == 2 and d["usage"]["prompt_tokens"] > 0
    kinds = [c["kind"] for c in d["trace"]["children"]]
    assert kinds == ["generate_documents", "read"]
    assert d["trace"]["children"][0]["llm_calls"][0]["prompt"].startswith("Generate a background document")


@pytest.mark.slow
def test_ask_on_demo_corpus_with_trace(hopqa_home, demo_index):
    r = hopqa("ask", QUESTION, "--llm", SMOL, "--trace", home=hopqa_home)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == f"Method: ircot ({SMOL})"  # the default method
    assert lines[2] == f" 1. retrieve: {QUESTION}" and lines[3].startswith("    passages: ")
    assert "Trace:" in lines and "- retrieve" in r.stdout and "- read" in r.stdout


#: The demo's question (Makefile QUESTION): two hops in the shipped MuSiQue dev set.
DEMO_QUESTION = "What team was Anna Benson's husband on?"


@pytest.mark.qwen
def test_default_ask_uses_qwen_and_demo_corpus(hopqa_home, demo_index):
    """`hopqa ask QUESTION` with no options: the README's main job, as `make demo` runs it."""
    from hopqa.datasets import load_shipped

    gold = next(e for e in load_shipped("musique", "dev") if e.question == DEMO_QUESTION).answers
    r = hopqa("ask", DEMO_QUESTION, home=hopqa_home, timeout=1200)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "Method: ircot (embedded:qwen2.5-1.5b)"
    assert lines[2] == f" 1. retrieve: {DEMO_QUESTION}" and " 2. thought: " in r.stdout  # the hops
    assert f"Answer: {gold[0]}" in lines and lines[-1].startswith("Cost: ")


def test_ask_eval_and_demos_share_one_declaration_of_their_model_options(capsys):
    """``--llm``, ``--corpus``, ``--k``, ... come from ``cli.MODEL_OPTIONS`` (one parent parser per
    sub-command, one help section), with the same type and validation everywhere."""
    from hopqa import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    wanted = {"ask": list(cli.MODEL_OPTIONS), "eval": list(cli.MODEL_OPTIONS),
              "demos": ["--llm", "--corpus", "--index", "--k", "--set", "--no-cache"]}
    for command, names in wanted.items():
        actions = {a.option_strings[0]: a for a in sub.choices[command]._actions if a.option_strings}
        for name in names:
            declared = cli.MODEL_OPTIONS[name]
            assert actions[name].type is declared.get("type") and actions[name].metavar == declared.get("metavar")
        assert "LLM and retrieval options:" in sub.choices[command].format_help()
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args([command, "--k", "0"] + (["--dataset", "x", "-m", "direct"] if command == "eval" else []))
        assert exit_.value.code == 2 and "--k: expected a whole number of at least 1, not '0'" in capsys.readouterr().err
    args = parser.parse_args(["demos", "--set", "a=1", "--set", "b=2", "--no-cache"])
    assert args.set == ["a=1", "b=2"] and args.no_cache and args.k is None and args.llm is None
    with pytest.raises(ValueError, match="no shared option"):
        cli._model_options("--llm", corpus="x")


def test_structured_switch_reaches_every_method_that_has_structured_steps():
    from hopqa.cli import _method_options, build_parser

    args = build_parser().parse_args(["eval", "--dataset", "musique", "--method", "self-ask,retrieve-then-read",
                                      "--structured", "off", "--set", "k=2"])
    assert _method_options("self-ask", args) == {"structured": "off", "k": 2}
    assert _method_options("retrieve-then-read", args) == {"k": 2}  # no structured step: nothing to switch
    per_method = build_parser().parse_args(["ask", "q", "--method", "hgot", "--structured", "off",
                                            "--set", "structured=on"])
    assert _method_options("hgot", per_method) == {"structured": "on"}  # --set wins for its method
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ask", "q", "--structured", "sometimes"])
