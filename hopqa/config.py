"""Where hopqa keeps its files, and the few defaults shared by the CLI and the Python API.

``home`` (``--home``, or the ``HOPQA_HOME`` environment variable, default ``~/.cache/hopqa``)
holds the assembled embedded models (``models/``), the LLM response cache (``cache/llm``) and
the demo corpus with its BM25 index (``demo/``). Environment variables are read here and in
the CLI only, never deep inside methods or backends.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The user-facing default model (the only packaged model that follows the prompts).
DEFAULT_LLM = "embedded:qwen2.5-1.5b"
#: The small, fast model the tests use.
TEST_LLM = "embedded:smollm2-135m"
#: Longest question accepted, in characters (longer input is an error, not a silent cut).
MAX_QUESTION_CHARS = 4000


def default_home(explicit: str | Path | None = None) -> Path:
    """The hopqa home directory (created if missing)."""
    home = Path(explicit or os.environ.get("HOPQA_HOME") or Path.home() / ".cache" / "hopqa").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def default_llm(explicit: str | None = None) -> str:
    """The LLM spec to use: the argument, else ``HOPQA_LLM``, else the embedded Qwen."""
    return explicit or os.environ.get("HOPQA_LLM") or DEFAULT_LLM
