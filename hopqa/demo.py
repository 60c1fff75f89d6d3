"""The demo corpus: every paragraph of the shipped dev and train subsets, deduplicated, indexed.

``demo_corpus_files`` names the splits: dev and train of MuSiQue, HotpotQA, 2WikiMultihopQA
and Adversarial HotpotQA, always the subsets shipped with hopqa (``hopqa/data``), never a
``--data-dir`` or a downloaded full release: the demo corpus stays small (13.5k passages, a
BM25 index in seconds) and the same on every machine. The full releases' paragraphs run to
hundreds of thousands; index them as a corpus of your own (``hopqa index``) for open-domain
runs over them.

Built once into ``<home>/demo/`` (``corpus.jsonl`` plus a BM25 index in ``bm25/``); the stamp
``source.json`` records ``DEMO_FORMAT`` and each source file's resolved path, size and mtime,
and the corpus is rebuilt when any of them changes (another file found first, a file edited,
a loader change that bumps ``DEMO_FORMAT``). A damaged index (a file missing, truncated or
changed: checked on every load, see ``hopqa.retrieval.bm25``) is rebuilt automatically, with a
warning naming the damaged file. It is the default corpus of ``hopqa ask`` and the
pooled corpus of the open-domain setting: a retriever must find a question's supporting
paragraphs among everyone else's.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from hopqa.corpus import dedupe, write_corpus
from hopqa.datasets import iter_paragraphs, load_shipped, shipped_data_dir
from hopqa.retrieval.bm25 import BM25Retriever, load_or_build
from hopqa.types import Passage

#: Bump when the loaders change the paragraphs they produce, so built demo corpora are rebuilt.
DEMO_FORMAT = 3

#: The (dataset, split) pairs whose paragraphs make the demo corpus.
DEMO_CORPUS_FILES: tuple[tuple[str, str], ...] = tuple(
    (name, split) for name in ("musique", "hotpotqa", "2wikimultihopqa", "adversarial_hotpotqa")
    for split in ("dev", "train")
)


def demo_corpus_files() -> list[tuple[str, str]]:
    """The (dataset, split) pairs whose paragraphs make the demo corpus: dev and train of
    musique, hotpotqa, 2wikimultihopqa and adversarial_hotpotqa."""
    return list(DEMO_CORPUS_FILES)


def demo_paragraphs() -> list[Passage]:
    """All paragraphs of the shipped demo splits, deduplicated by title + text."""
    passages: list[Passage] = []
    for name, split in demo_corpus_files():
        passages.extend(iter_paragraphs(load_shipped(name, split)))
    return dedupe(passages)


def demo_sources() -> list[list[Any]]:
    """``[dataset, split, resolved path, size, mtime_ns]`` of each shipped file the demo corpus reads."""
    from hopqa.datasets import REGISTRY

    sig: list[list[Any]] = []
    for name, split in demo_corpus_files():
        rel = REGISTRY[name].splits[split].file
        path = (shipped_data_dir() / f"{rel}.gz").resolve()
        st = path.stat()
        sig.append([name, split, str(path), st.st_size, st.st_mtime_ns])
    return sig


def build_demo_corpus(home: Path) -> Path:
    """Write ``<home>/demo/corpus.jsonl`` if missing or built from other files; return its path."""
    home = Path(home)
    source = {"format": DEMO_FORMAT, "files": demo_sources()}
    out_dir = home / "demo"
    corpus = out_dir / "corpus.jsonl"
    stamp = out_dir / "source.json"
    if corpus.exists() and stamp.exists() and _read_stamp(stamp) == source:
        return corpus
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"hopqa: building the demo corpus from the shipped subsets in {shipped_data_dir()} (first use) ...",
          file=sys.stderr)
    passages = demo_paragraphs()
    tmp = corpus.with_suffix(".jsonl.tmp")
    write_corpus(passages, tmp)
    tmp.replace(corpus)
    stamp.write_text(json.dumps(source))
    return corpus


def _read_stamp(stamp: Path) -> Any:
    try:
        return json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None  # unreadable: rebuild


def demo_retriever(home: Path) -> BM25Retriever:
    """The BM25 retriever over the demo corpus, building corpus and index on first use."""
    corpus = build_demo_corpus(home)
    return load_or_build(corpus, home / "demo" / "bm25")


def index_dir_for(corpus: Path, home: Path) -> Path:
    """Where the BM25 index of a user corpus lives: ``<home>/indexes/<name>-<hash of path>``."""
    digest = hashlib.sha256(str(corpus.resolve()).encode()).hexdigest()[:12]
    return home / "indexes" / f"{corpus.stem}-{digest}"
