"""Every example of the README and the docs runs here, so that a renamed option or function
breaks a test, not a reader.

- **Python** blocks run, a page's blocks in order in one namespace (a later block goes on from an
  earlier one), on the embedded SmolLM2 where they name the embedded Qwen (the tests do not load
  the 1.1 GB model) and the demo corpus; an example that talks to ``hopqa serve`` at
  127.0.0.1:8000 talks to the service started for it, on SmolLM2 (slow: the real model).
- **Shell** blocks: every ``hopqa`` command is parsed by hopqa's own argument parser, and every
  ``curl`` request with a JSON body is sent to the service (on a scripted model), which must
  accept it. What cannot run here is named in ``UNCHECKED`` with the reason; any other command
  fails the test, so a new kind of example gets a check before it is published.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>python|bash)\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE)
#: Commands an example may show that cannot run here, and why.
UNCHECKED = {
    "make": "the two commands: CI runs them (make test) and the Qwen test runs the demo's question",
    "python": "starts llama.cpp's own server (docs/llm-backends.md), which never returns",
}
#: The service's address in the examples.
SERVICE = "http://127.0.0.1:8000"


def blocks(lang: str) -> Iterator[tuple[Path, int, str]]:
    """(page, line, code) of every ``lang`` block of the README and the docs, in page order."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group("lang") == lang:
                yield page, text.count("\n", 0, m.start()) + 1, m.group("code")


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
def test_shell_examples_parse_and_the_service_accepts_their_requests(page, line, code):
    from fastapi.testclient import TestClient

    from hopqa.cli import build_parser
    from hopqa.llm.scripted import ScriptedLLM
    from hopqa.retrieval.pool import CandidatePool
    from hopqa.server import ServiceSettings, create_app
    from hopqa.types import Passage

    pool = CandidatePool([Passage("a", "Van Hook Township", "Van Hook Township is in Mountrail County.")])
    client = TestClient(create_app(ServiceSettings(llm=ScriptedLLM(replies=lambda r: "Mountrail County"),
                                                   retriever_for=lambda kind: pool)),
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
            if "-d" not in words:
                continue  # a GET or DELETE of a job id that only a running service has
            body = json.loads(words[words.index("-d") + 1])
            url = next(w for w in words[1:] if not w.startswith("-") and "/v1/" in w)
            r = client.post("/v1/" + url.split("/v1/", 1)[1], json=body)
            assert r.status_code == 200, f"{where}: {r.status_code} {r.text[:300]}"
        else:
            assert program in UNCHECKED, f"{where}: an example no test checks (add a check, or a reason to UNCHECKED)"


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
