"""The demo corpus: every paragraph of the shipped dev and train files, deduplicated, indexed.

Built once into ``<home>/demo/`` (``corpus.jsonl`` plus a BM25 index in ``bm25/``) from the
data directory (``--data-dir`` / ``HOPQA_DATA_DIR`` / ``../shared/data``); rebuilt when the
corpus file changes. It is the default corpus of ``hopqa ask`` and the pooled corpus of the
open-domain setting: a retriever must find a question's supporting paragraphs among everyone
else's.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from hopqa.corpus import dedupe, write_corpus
from hopqa.datasets import (
    DatasetError,
    default_data_dir,
    demo_corpus_files,
    iter_paragraphs,
    load_dataset,
)
from hopqa.retrieval.bm25 import BM25Retriever, load_or_build
from hopqa.types import Passage

#: Bump when the loaders change the paragraphs they produce, so built demo corpora are rebuilt.
DEMO_FORMAT = 2


def demo_paragraphs(data_dir: Path) -> list[Passage]:
    """All paragraphs of the demo files, deduplicated by title + text."""
    passages: list[Passage] = []
    for name, split in demo_corpus_files(data_dir):
        passages.extend(iter_paragraphs(load_dataset(name, split, data_dir=data_dir)))
    return dedupe(passages)


def build_demo_corpus(home: Path, data_dir: str | Path | None = None) -> Path:
    """Write ``<home>/demo/corpus.jsonl`` if missing or built from other data; return its path."""
    data = default_data_dir(data_dir)
    if data is None:
        raise DatasetError(
            "no data directory found for the demo corpus: pass --data-dir or set HOPQA_DATA_DIR "
            "to the folder that holds musique/, hotpotqa/, 2wikimultihopqa/ ..."
        )
    out_dir = home / "demo"
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus = out_dir / "corpus.jsonl"
    stamp = out_dir / "source.json"
    source = {"format": DEMO_FORMAT, "data_dir": str(Path(data).resolve()), "files": _files_signature(Path(data))}
    if corpus.exists() and stamp.exists() and json.loads(stamp.read_text()) == source:
        return corpus
    print(f"hopqa: building the demo corpus from {data} (first use) ...", file=sys.stderr)
    passages = demo_paragraphs(Path(data))
    tmp = corpus.with_suffix(".jsonl.tmp")
    write_corpus(passages, tmp)
    tmp.replace(corpus)
    stamp.write_text(json.dumps(source))
    return corpus


def _files_signature(data_dir: Path) -> list[list[object]]:
    sig = []
    for name, split in demo_corpus_files(data_dir):
        from hopqa.datasets import split_path

        p = split_path(name, split, data_dir)
        st = p.stat()
        sig.append([name, split, st.st_size, int(st.st_mtime)])
    return sig


def demo_retriever(home: Path, data_dir: str | Path | None = None) -> BM25Retriever:
    """The BM25 retriever over the demo corpus, building corpus and index on first use."""
    corpus = build_demo_corpus(home, data_dir)
    return load_or_build(corpus, home / "demo" / "bm25")


def index_dir_for(corpus: Path, home: Path) -> Path:
    """Where the BM25 index of a user corpus lives: ``<home>/indexes/<name>-<hash of path>``."""
    digest = hashlib.sha256(str(corpus.resolve()).encode()).hexdigest()[:12]
    return home / "indexes" / f"{corpus.stem}-{digest}"
