"""Shared fixtures: one embedded model per test process, a private hopqa home, the demo index.

Markers: ``slow`` tests run the real embedded model (SmolLM2-135M) and are part of the
default run; ``make test-quick`` deselects them. ``qwen`` tests load the 1.1 GB Qwen model and
run only with ``--run-qwen``. LLM tests must not run in parallel (OpenMP busy-waits).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent


def _git_status() -> str | None:
    """``git status --porcelain`` of the checkout (None outside a git checkout or without git)."""
    import subprocess

    try:
        r = subprocess.run(["git", "status", "--porcelain"], cwd=_ROOT, capture_output=True, text=True, timeout=60,
                           check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def _asked_picture(status_line: str) -> bool:
    """Whether a ``git status --porcelain`` line names a PNG in the folder ``HOPQA_SCREENSHOTS``
    asks the browser test to draw into (``make screenshots``)."""
    import os

    folder = os.environ.get("HOPQA_SCREENSHOTS")
    if not folder:
        return False
    path = (_ROOT / status_line[3:].strip().strip('"')).resolve()
    return path.suffix == ".png" and path.parent == (_ROOT / folder).resolve()


def pytest_sessionstart(session):
    session.config._hopqa_git_status = _git_status()


def pytest_sessionfinish(session, exitstatus):
    """The suite leaves the checkout as it found it: a tracked file changed or a file left
    behind (outside what .gitignore ignores) fails the run, naming them. The pictures that
    ``make screenshots`` asks for (``HOPQA_SCREENSHOTS=docs``: PNG files in that folder) are
    what that run is for, and do not count."""
    before = getattr(session.config, "_hopqa_git_status", None)
    after = _git_status()
    if before is None or after is None or before == after or hasattr(session.config, "workerinput"):
        return
    changed = sorted(line for line in set(after.splitlines()) - set(before.splitlines()) if not _asked_picture(line))
    if changed:
        session.config.get_terminal_writer().line(
            "the test suite changed the checkout (git status): " + "; ".join(changed), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_addoption(parser):
    parser.addoption("--run-qwen", action="store_true", help="run tests that load the Qwen2.5-1.5B model")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-qwen"):
        return
    skip = pytest.mark.skip(reason="loads the 1.1 GB Qwen model: run with --run-qwen")
    for item in items:
        if "qwen" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def hopqa_home(tmp_path_factory) -> Path:
    """A private HOPQA_HOME for the whole session (cache, demo index)."""
    home = tmp_path_factory.mktemp("hopqa-home")
    os.environ["HOPQA_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark subsets shipped with hopqa (``hopqa/data``): tests pin the data they use."""
    from hopqa.datasets import shipped_data_dir

    return shipped_data_dir()


@pytest.fixture(scope="session")
def smollm2():
    """The real embedded SmolLM2-135M (uncached), shared by every test of the session."""
    from hopqa.llm.llamacpp import EmbeddedConfig, LlamaCppLLM

    llm = LlamaCppLLM("smollm2-135m", config=EmbeddedConfig(n_ctx=4096))
    yield llm
    llm.close()


@pytest.fixture(scope="session")
def demo_index(hopqa_home, data_dir):
    """The BM25 retriever over the demo corpus, built in the private home."""
    from hopqa.demo import demo_retriever

    return demo_retriever(home=hopqa_home)
