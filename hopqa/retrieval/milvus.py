"""Milvus: BM25, dense and hybrid search in one collection on a server (corpora beyond one machine).

A collection is named by a URI: ``milvus://HOST:PORT/COLLECTION`` (plain HTTP/gRPC to the
server) or ``http(s)://HOST:PORT/COLLECTION``; the token of a secured server (``user:password``
or an API key) comes from ``$MILVUS_TOKEN`` and is never recorded. The same client code talks
to a Milvus cluster, a standalone server and milvus-lite (what the tests start on 127.0.0.1).

Collection schema (``hopqa index CORPUS --engine milvus --out milvus://...``):

- ``row`` INT64, primary key: the passage's position in the (deduplicated) corpus;
- ``pid`` VARCHAR: the passage id; ``title`` VARCHAR;
- ``body`` VARCHAR, analyzed: ``title text`` (the passage's text is ``body`` after the title);
  its analyzer is the ``standard`` tokenizer, lower-casing, bm25s's English stopwords and the
  English Snowball stemmer (``ANALYZER``), close to hopqa's other BM25 engines;
- ``sparse`` SPARSE_FLOAT_VECTOR, made by Milvus's own BM25 function from ``body`` (Milvus
  >= 2.5), indexed ``SPARSE_INVERTED_INDEX`` with the BM25 metric;
- ``dense`` FLOAT_VECTOR (when built with an embedder): ``title. text`` embedded as dense
  retrieval does (``hopqa.retrieval.dense``), L2-normalised, indexed HNSW (M 32,
  efConstruction 40; searched with ef 128) with the inner product.

hopqa's metadata (kind, embedder, dimension, corpus fingerprint, number of passages, whether
the load completed) is a collection property, ``hopqa.meta``. Loading is resumable: passages
are upserted by ``row`` in batches, their vectors cached in chunks on disk as for dense
indexes, so a load run again after an interruption re-embeds nothing and rewrites the same
rows. A complete collection is not overwritten unless asked (``overwrite``).

Search modes (``--retriever`` with ``--index milvus://...``): ``bm25``, ``dense`` and ``hybrid``
(Milvus's own reciprocal rank fusion, ``RRFRanker(60)``, over both). Scores are Milvus's:
BM25 scores (milvus-lite reports them negated; hopqa reports their magnitude), cosines, RRF
scores.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from hopqa.config import VERSION, milvus_token
from hopqa.console import progress_bar
from hopqa.retrieval.base import RetrieverBase
from hopqa.retrieval.bm25 import STOPWORDS_EN
from hopqa.retrieval.dense import EmbeddingCache, passage_text
from hopqa.retrieval.store import RetrievalIndexError
from hopqa.types import Passage

FORMAT = 1
META_PROPERTY = "hopqa.meta"
MODES = ("bm25", "dense", "hybrid")
ANALYZER = {"tokenizer": "standard",
            "filter": ["lowercase", {"type": "stop", "stop_words": list(STOPWORDS_EN)},
                       {"type": "stemmer", "language": "english"}]}
HNSW_PARAMS, EF_SEARCH, RRF_K = {"M": 32, "efConstruction": 40}, 128, 60
#: Passages embedded and upserted per batch (and per embedding-cache chunk).
BATCH = 1024
MAX_VARCHAR = 65_535
_URI = re.compile(r"^(milvus|https?)://([^/?#]+)/([A-Za-z_][A-Za-z0-9_]*)/?$")


def is_milvus_uri(text: str | Any) -> bool:
    return isinstance(text, str) and bool(re.match(r"^(milvus|https?)://", text))


def parse_uri(uri: str) -> tuple[str, str]:
    """``(server URI for the client, collection)`` of ``milvus://HOST:PORT/COLLECTION`` or
    ``http(s)://HOST:PORT/COLLECTION``; ``RetrievalIndexError`` naming the form otherwise."""
    m = _URI.match(uri)
    if not m:
        raise RetrievalIndexError(f"not a Milvus collection URI: {uri!r} (expected milvus://HOST:PORT/COLLECTION or "
                                  "http(s)://HOST:PORT/COLLECTION; a collection name is letters, digits and _)")
    scheme, host, collection = m.groups()
    return f"{'http' if scheme == 'milvus' else scheme}://{host}", collection


#: gRPC channel options of hopqa's Milvus connections. pymilvus pings an idle connection every
#: 10 s; a gRPC server with the library's default policy (milvus-lite's) answers pings without
#: calls more often than every 5 min with GOAWAY "too_many_pings", which broke the next client
#: made for the same server after a minute's idle. Keepalive pings are kept during calls.
GRPC_OPTIONS = {"grpc.keepalive_permit_without_calls": 0}


def _client(uri: str) -> tuple[Any, str]:
    """A client of the server in ``uri`` and the collection's name. pymilvus shares one
    connection per server; if that one cannot be brought back, a dedicated one is tried once."""
    try:
        from pymilvus import MilvusClient
    except ImportError as exc:
        raise RetrievalIndexError("Milvus needs pymilvus: pip install 'hopqa[milvus]'") from exc
    server, collection = parse_uri(uri)
    kwargs = {"uri": server, "token": milvus_token() or "", "timeout": 30, "grpc_options": dict(GRPC_OPTIONS)}
    try:
        try:
            client = MilvusClient(**kwargs)
        except Exception:  # a shared connection the server closed: once more on a new one
            client = MilvusClient(**kwargs, dedicated=True)
    except Exception as exc:  # pymilvus raises its own MilvusException / grpc errors
        raise RetrievalIndexError(f"cannot reach Milvus at {server}: {type(exc).__name__}: {exc}") from exc
    return client, collection


def _schema(dim: int | None) -> tuple[Any, Any]:
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("row", DataType.INT64, is_primary=True)
    schema.add_field("pid", DataType.VARCHAR, max_length=1024)
    schema.add_field("title", DataType.VARCHAR, max_length=4096)
    schema.add_field("body", DataType.VARCHAR, max_length=MAX_VARCHAR, enable_analyzer=True, analyzer_params=ANALYZER)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["body"],
                                 output_field_names=["sparse"]))
    index = MilvusClient.prepare_index_params()
    index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    if dim is not None:
        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
        index.add_index(field_name="dense", index_type="HNSW", metric_type="IP", params=HNSW_PARAMS)
    return schema, index


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-8 bytes (VARCHAR lengths are bytes)."""
    raw = text.encode("utf-8")
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", "ignore")


def read_meta(client: Any, collection: str) -> dict[str, Any] | None:
    """hopqa's metadata of a collection (None: no collection, or not written by hopqa)."""
    if not client.has_collection(collection):
        return None
    raw = (client.describe_collection(collection).get("properties") or {}).get(META_PROPERTY)
    try:
        meta = json.loads(raw) if raw else None
    except ValueError:
        return None
    return meta if isinstance(meta, dict) else None


class MilvusRetriever(RetrieverBase):
    """Search a Milvus collection built by hopqa (module docstring)."""

    def __init__(self, uri: str, mode: str | None = None, embedder: Any = None) -> None:
        self.uri = uri
        self._client, self.collection = _client(uri)
        meta = read_meta(self._client, self.collection)
        if meta is None:
            raise RetrievalIndexError(f"no hopqa collection at {uri} (build one with: hopqa index CORPUS --engine "
                                      f"milvus --out {uri})")
        if not meta.get("complete"):
            raise RetrievalIndexError(f"the collection at {uri} was not loaded completely: run the hopqa index command "
                                      "that loads it again (it resumes)")
        self.meta = meta
        self.mode = mode or str(meta.get("kind"))
        if self.mode not in MODES:
            raise RetrievalIndexError(f"unknown Milvus search mode {self.mode!r}; use one of {', '.join(MODES)}")
        self.embedder = None
        if self.mode != "bm25":
            if not meta.get("model"):
                raise RetrievalIndexError(f"the collection at {uri} has no dense vectors: search it with --retriever bm25, "
                                          "or load it again with --kind hybrid")
            if embedder is None:
                from hopqa.embed import load_embedder

                embedder = load_embedder(str(meta["model"]))
            elif embedder.name != meta["model"]:
                raise RetrievalIndexError(f"the collection at {uri} was embedded with {meta['model']!r}, not "
                                          f"{embedder.name!r}")
            self.embedder = embedder
        self._client.load_collection(self.collection)
        self.name = f"milvus-{self.mode}" + (f":{self.embedder.name}" if self.embedder is not None else "")

    @property
    def size(self) -> int:
        return int(self.meta.get("num_docs", 0))

    # -- loading a corpus ------------------------------------------------------------------
    @classmethod
    def build(cls, uri: str, passages: Iterable[Passage], *, embedder: Any = None, fingerprint: str,
              cache_key: str | None = None, cache_dir: Any = None, progress: bool = True, total: int | None = None,
              extra_meta: dict[str, Any] | None = None, overwrite: bool = False) -> MilvusRetriever:
        """Load ``passages`` (already deduplicated) into the collection ``uri`` names, with dense
        vectors when ``embedder`` is given (module docstring: resumable, batches of ``BATCH``).
        ``fingerprint`` identifies the corpus; ``cache_key`` (default ``fingerprint``) names its
        vectors in the embedding cache — the passages' fingerprint shares them with dense
        indexes of the same passages."""
        client, collection = _client(uri)
        old = read_meta(client, collection)
        kind = "hybrid" if embedder is not None else "bm25"
        model = embedder.name if embedder is not None else None
        same = old is not None and old.get("fingerprint") == fingerprint and old.get("model") == model
        if client.has_collection(collection) and not same:
            if (old is None or old.get("complete")) and not overwrite:
                raise RetrievalIndexError(f"{uri} already holds {'a collection hopqa did not write' if old is None else 'another corpus'}: "
                                          "choose another collection name, or pass --overwrite to replace it")
            client.drop_collection(collection)
        elif same and old is not None and old.get("complete") and not overwrite:
            return cls(uri, embedder=embedder)
        meta: dict[str, Any] = {"kind": kind, "format": FORMAT, "hopqa_version": VERSION, "model": model,
                                "fingerprint": fingerprint, "complete": False, **(extra_meta or {})}

        def ensure_collection(dim: int | None) -> None:  # made with the first batch (its vectors' dimension)
            if not client.has_collection(collection):
                schema, index = _schema(dim)
                client.create_collection(collection, schema=schema, index_params=index)
            client.alter_collection_properties(collection, properties={META_PROPERTY: json.dumps(meta)})

        cache = (EmbeddingCache(cache_dir, model, cache_key or fingerprint)
                 if (embedder is not None and cache_dir is not None) else None)
        bar = progress_bar(total=total, desc="loading into Milvus", enabled=progress, unit=" passages", mininterval=0.5)
        rows = 0
        try:
            it = iter(passages)
            for chunk_no in itertools.count():
                batch = list(itertools.islice(it, BATCH))
                if not batch:
                    break
                records = [{"row": rows + i, "pid": _cut(p.id, 1024), "title": _cut(p.title, 4096),
                            "body": _cut(f"{p.title} {p.text}", MAX_VARCHAR)} for i, p in enumerate(batch)]
                if embedder is not None:
                    vectors = cache.load(chunk_no, len(batch)) if cache is not None else None
                    if vectors is None:
                        vectors = np.asarray(embedder.encode_uncached([passage_text(p) for p in batch]), dtype=np.float32)
                        if cache is not None:
                            cache.save(chunk_no, vectors)
                    for record, vector in zip(records, vectors):
                        record["dense"] = vector.tolist()
                if chunk_no == 0:
                    ensure_collection(int(vectors.shape[1]) if embedder is not None else None)
                client.upsert(collection, records)
                rows += len(batch)
                bar.update(len(batch))
        finally:
            bar.close()
        if rows == 0:
            if client.has_collection(collection):
                client.drop_collection(collection)
            raise RetrievalIndexError("cannot load an empty corpus (no passage with text) into Milvus")
        client.flush(collection)
        meta.update({"complete": True, "num_docs": rows})
        client.alter_collection_properties(collection, properties={META_PROPERTY: json.dumps(meta)})
        return cls(uri, embedder=embedder)

    # -- search ----------------------------------------------------------------------------
    def search(self, query: str, k: int = 5) -> list[Passage]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: list[str], k: int = 5) -> list[list[Passage]]:
        results: list[list[Passage]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q and q.strip()]
        if not live or k <= 0:
            return results
        texts = [queries[i] for i in live]
        fields = ["pid", "title", "body"]
        dense = (np.asarray(self.embedder.encode(texts), dtype=np.float32).tolist()
                 if self.embedder is not None else None)
        if self.mode == "bm25":
            hits = self._client.search(self.collection, data=texts, anns_field="sparse", limit=k, output_fields=fields,
                                       search_params={"metric_type": "BM25"})
        elif self.mode == "dense":
            hits = self._client.search(self.collection, data=dense, anns_field="dense", limit=k, output_fields=fields,
                                       search_params={"metric_type": "IP", "params": {"ef": max(EF_SEARCH, k)}})
        else:
            from pymilvus import AnnSearchRequest, RRFRanker

            depth = max(20, 2 * k)
            requests = [AnnSearchRequest(data=texts, anns_field="sparse", param={"metric_type": "BM25"}, limit=depth),
                        AnnSearchRequest(data=dense, anns_field="dense",
                                         param={"metric_type": "IP", "params": {"ef": max(EF_SEARCH, depth)}},
                                         limit=depth)]
            hits = self._client.hybrid_search(self.collection, requests, ranker=RRFRanker(RRF_K), limit=k,
                                              output_fields=fields)
        for i, found in zip(live, hits):
            results[i] = [_passage(h, self.mode) for h in found]
        return results


def _passage(hit: dict[str, Any], mode: str) -> Passage:
    entity = hit.get("entity") or {}
    title, body = str(entity.get("title") or ""), str(entity.get("body") or "")
    text = body[len(title) + 1:] if body.startswith(title + " ") else body
    score = float(hit.get("distance") or 0.0)
    return Passage(id=str(entity.get("pid")), title=title, text=text, score=abs(score) if mode == "bm25" else score)

