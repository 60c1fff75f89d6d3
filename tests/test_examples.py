"""Every example of the README and the docs runs here, so that a renamed option or function
breaks a test, not a reader.

- **Python** blocks run, a page's blocks in order in one namespace (a later block goes on from an
  earlier one), on the embedded SmolLM2 where they name the embedded Qwen (the tests do not load
  the 1.1 GB model) and the demo corpus; an example that talks to ``hopqa serve`` at
  127.0.0.1:8000 talks to the service started for it, on SmolLM2 (slow: the real model).
- **Shell** blocks: every ``hopqa`` command is parsed by hopqa's own argument parser and then
  run, a block's commands in order in a folder of their own, on a scripted OpenAI-compatible
  server in place of the model or server it names (slow: ``hopqa serve`` aside, ``NOT_RUN``);
  every ``curl`` request is sent to the service (on a scripted model, its runs the stored runs of
  the embedded Qwen), which must answer it, but for a DELETE and a job id only a running service
  has. What cannot run here is named in ``UNCHECKED`` with the reason; any other command
  fails the test, so a new kind of example gets a check before it is published.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_server import fault_server  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: A fenced block, at the margin or indented under a list item (its code is then dedented).
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>python|bash)\n(?P<code>.*?)^(?P=indent)```", re.DOTALL | re.MULTILINE)
#: Commands an example may show that cannot run here (by their first words), and why.
UNCHECKED = {
    "make demo": "the first of the two commands: the Qwen test runs the demo's question",
    "make test": "the second of the two commands: CI runs it",
    "python -m llama_cpp.server": "starts llama.cpp's own server (docs/llm-backends.md), which never returns",
}


def unchecked(words: list[str]) -> bool:
    """Whether a command is one of ``UNCHECKED`` (its first words those of an entry)."""
    return any(words[:len(key.split())] == key.split() for key in UNCHECKED)
#: The service's address in the examples.
SERVICE = "http://127.0.0.1:8000"


def blocks(lang: str) -> Iterator[tuple[Path, int, str]]:
    """(page, line, code) of every ``lang`` block of the README and the docs, in page order."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group("lang") == lang:
                yield page, text.count("\n", 0, m.start()) + 1, textwrap.dedent(m.group("code"))


def _substituted(code: str) -> str:
    """``code`` with each ``$(...)`` command substitution (nested parentheses and all) as one word."""
    out, i = [], 0
    while (start := code.find("$(", i)) >= 0:
        depth, j = 0, start + 1
        while j < len(code):
            depth += {"(": 1, ")": -1}.get(code[j], 0)
            if depth == 0:
                break
            j += 1
        out += [code[i:start], "SUBSTITUTED"]
        i = j + 1
    return "".join(out) + code[i:]


def _lines(code: str) -> Iterator[str]:
    """The command lines of a shell block: continuation lines joined, a quoted newline kept."""
    line, quote = [], ""
    for ch in code.replace("\\\n", " "):
        if ch in "'\"" and quote in ("", ch):
            quote = "" if quote else ch
        if ch == "\n" and not quote:
            yield "".join(line)
            line = []
        else:
            line.append(ch)
    yield "".join(line)


def commands(code: str) -> Iterator[list[str]]:
    """The commands of a shell block as argument lists: comments and ``NAME=value`` prefixes
    dropped, a ``$(...)`` substitution standing as one word."""
    for line in _lines(_substituted(code)):
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            words = words[1:]
        if words:
            yield words


def test_the_examples_are_found():
    python = list(blocks("python"))
    shell = [c for _, _, code in blocks("bash") for c in commands(code)]
    assert len(python) >= 6 and len(shell) >= 15
    assert any(c[0].endswith("hopqa") and c[1] == "ask" for c in shell)
    assert any(c[0] == "curl" for c in shell)


@pytest.mark.parametrize("page, line, code", list(blocks("bash")),
                         ids=lambda v: f"{v.relative_to(ROOT)}" if isinstance(v, Path) else None)
def test_shell_examples_parse_and_the_service_accepts_their_requests(page, line, code, tmp_path):
    from fastapi.testclient import TestClient

    from hopqa.cli import build_parser
    from hopqa.llm.scripted import ScriptedLLM
    from hopqa.retrieval.pool import CandidatePool
    from hopqa.server import ServiceSettings, create_app
    from hopqa.types import Passage

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from doc_tables import write_runs

    pool = CandidatePool([Passage("a", "Van Hook Township", "Van Hook Township is in Mountrail County.")])
    write_runs(ROOT / "tests" / "fixtures" / "qwen_musique30.json.gz", tmp_path)  # stored runs of the embedded Qwen
    client = TestClient(create_app(ServiceSettings(llm=ScriptedLLM(replies=lambda r: "Mountrail County"),
                                                   retriever_for=lambda kind: pool, runs_dir=tmp_path / "off")),
                        base_url="http://127.0.0.1")
    for words in commands(code):
        where = f"{page.relative_to(ROOT)}:{line}: {' '.join(words)}"
        program = Path(words[0]).name
        if program == "hopqa":
            try:
                build_parser().parse_args(words[1:])
            except SystemExit as exc:
                pytest.fail(f"{where}: hopqa's parser refuses it (exit {exc.code})")
        elif program == "curl":
            url = next(w for w in words[1:] if not w.startswith("-") and "/v1/" in w)
            path = "/v1/" + url.split("/v1/", 1)[1]
            if "-d" in words:
                r = client.post(path, json=json.loads(words[words.index("-d") + 1]))
            elif "-X" in words or path.startswith("/v1/jobs/"):
                continue  # a DELETE, or a GET of a job id that only a running service has
            else:
                r = client.get(path)  # the runs: the stored runs of the embedded Qwen
            assert r.status_code == 200, f"{where}: {r.status_code} {r.text[:300]}"
        else:
            assert unchecked(words), f"{where}: an example no test checks (add a check, or a reason to UNCHECKED)"


#: ``hopqa`` subcommands an example may show that a test does not run, and why (their
#: arguments are still parsed above).
NOT_RUN = {"serve": "starts the service, which runs until stopped: the service's own examples run against one "
                    "started for them (the curl requests above, the Python examples below)"}
#: Subcommands that talk to an LLM: run on the scripted server, which an example's ``--llm`` names
#: instead of its own (a model, a server), and which one without ``--llm`` is given.
TAKE_LLM = ("ask", "eval", "calibrate", "demos")
#: The files an example names as a reader's own: a small corpus in the generic format.
EXAMPLE_FILES = {
    "my-corpus.jsonl": "".join(json.dumps(p) + "\n" for p in [
        {"id": "d1", "title": "Van Hook Township", "text": "Van Hook Township is a township in Mountrail County, "
                                                           "North Dakota."},
        {"id": "d2", "title": "Mountrail County", "text": "Mountrail County is a county in North Dakota. Its county "
                                                          "seat is Stanley."},
        {"id": "d3", "title": "Stanley, North Dakota", "text": "Stanley is a city in Mountrail County."},
    ]),
}


def runnable(words: list[str], llm: str, home: Path) -> list[str] | None:
    """The arguments an example's ``hopqa`` command runs with in a test: its own, on the scripted
    server ``llm`` (every ``--llm`` / ``--scorer-llm`` value replaced, given where it has none)
    and the test's ``home``; None for a subcommand of ``NOT_RUN``."""
    args = list(words[1:])
    if not args or args[0] in NOT_RUN:
        return None
    for flag in ("--llm", "--scorer-llm"):
        for i, word in enumerate(args[:-1]):
            if word == flag:
                args[i + 1] = llm
    if args[0] in TAKE_LLM and "--llm" not in args:
        args += ["--llm", llm]
    return [*args, "--home", str(home)]


def _shell_blocks_to_run() -> list[tuple[Path, int, str]]:
    return [(page, line, code) for page, line, code in blocks("bash")
            if any(Path(w[0]).name == "hopqa" and len(w) > 1 and w[1] not in NOT_RUN for w in commands(code))]


@pytest.mark.slow
@pytest.mark.parametrize("page, line, code", _shell_blocks_to_run(),
                         ids=lambda v: f"{v.relative_to(ROOT)}" if isinstance(v, Path) else None)
def test_shell_examples_run(page, line, code, fault_server, hopqa_home, demo_index, tmp_path, monkeypatch, capsys):
    """A block's ``hopqa`` commands run in order, as a reader would type them, in a folder of
    their own (holding the files they name as the reader's: ``EXAMPLE_FILES``), on a scripted
    OpenAI-compatible server instead of the model or server they name (``runnable``), over the
    demo corpus where they name no corpus: each must exit 0 and print something."""
    from hopqa.cli import main

    server = fault_server()
    llm = f"openai:fake@{server.url}?loglikelihood=echo"
    monkeypatch.chdir(tmp_path)
    for name, text in EXAMPLE_FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    for words in commands(code):
        if Path(words[0]).name != "hopqa" or (args := runnable(words, llm, hopqa_home)) is None:
            continue
        where = f"{page.relative_to(ROOT)}:{line}: {' '.join(words)}"
        code_ = main([*args, "--no-progress"] if args[0] in ("eval", "calibrate") else args)
        printed = capsys.readouterr()
        assert code_ == 0, f"{where}: exit {code_}\n{printed.err[-2000:]}"
        assert printed.out.strip(), f"{where}: printed nothing"


def test_example_commands_run_on_the_scripted_server():
    """``runnable``: every model or server an example names gives way to the scripted server,
    which a command that talks to an LLM is given where it names none; ``serve`` is not run."""
    home = Path("/h")
    assert runnable(["hopqa", "ask", "Q?", "--llm", "openai:gpt-4o-mini"], "S", home) == \
        ["ask", "Q?", "--llm", "S", "--home", "/h"]
    assert runnable([".venv/bin/hopqa", "ask", "Q?"], "S", home) == ["ask", "Q?", "--llm", "S", "--home", "/h"]
    assert runnable(["hopqa", "ask", "Q?", "--method", "gensco-stop", "--scorer-llm", "embedded:x", "--llm", "y"],
                    "S", home) == ["ask", "Q?", "--method", "gensco-stop", "--scorer-llm", "S", "--llm", "S",
                                   "--home", "/h"]
    assert runnable(["hopqa", "report", "runs/x"], "S", home) == ["report", "runs/x", "--home", "/h"]
    assert runnable(["hopqa", "serve", "--llm", "embedded:qwen2.5-1.5b"], "S", home) is None


def _python_pages() -> list[Path]:
    return sorted({page for page, _, _ in blocks("python")})


@pytest.mark.slow
@pytest.mark.parametrize("page", _python_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(page, hopqa_home, demo_index, smollm2, capsys):
    """A page's Python examples in order, on SmolLM2 and the demo corpus; each prints something."""
    from hopqa.methods import METHODS
    from hopqa.server import ServiceSettings
    from tests.test_server_page import serve

    codes = [(line, code) for p, line, code in blocks("python") if p == page]
    module = types.ModuleType("hopqa_docs_example")  # a module of its own, as a reader's script is
    sys.modules[module.__name__] = module  # (dataclasses look their module up)
    namespace = module.__dict__
    registered = set(METHODS)
    try:
        with serve(ServiceSettings(llm=smollm2, retriever_for=lambda kind: demo_index, home=hopqa_home)) as url:
            for line, code in codes:
                code = code.replace("embedded:qwen2.5-1.5b", "embedded:smollm2-135m").replace(SERVICE, url.rstrip("/"))
                exec(compile(code, f"{page.relative_to(ROOT)}:{line}", "exec"), namespace)  # noqa: S102 - the docs' code
                printed = capsys.readouterr().out
                if "print(" in code:
                    assert printed.strip(), f"{page.relative_to(ROOT)}:{line} printed nothing"
    finally:
        sys.modules.pop(module.__name__, None)
        for name in set(METHODS) - registered:  # a method an example adds (docs/architecture.md) is not kept
            del METHODS[name]
