"""Milvus through pymilvus against milvus-lite started on 127.0.0.1 (the same client code talks
to a Milvus cluster). Skipped, with the reason, only when milvus-lite cannot start here."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from hopqa.corpus import write_corpus
from hopqa.embed import LexicalEmbedder
from hopqa.retrieval.indexes import build_corpus_index, open_index
from hopqa.retrieval.milvus import MilvusRetriever, parse_uri
from hopqa.retrieval.store import CorpusMismatchError, RetrievalIndexError
from tests.test_dense import PASSAGES

pytest.importorskip("pymilvus")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def milvus(tmp_path_factory):
    """A milvus-lite server on 127.0.0.1 (``--host`` given: it would bind every interface)."""
    pytest.importorskip("milvus_lite", reason="milvus-lite is not installed")
    port = _free_port()
    data = tmp_path_factory.mktemp("milvus")
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data), "--host",
                             "127.0.0.1", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.skip(f"milvus-lite cannot start here: {proc.stdout.read().decode(errors='replace')[-500:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.skip("milvus-lite did not listen within 60 s")
    yield f"milvus://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_uris_are_parsed_or_refused():
    assert parse_uri("milvus://db.example:19530/wiki") == ("http://db.example:19530", "wiki")
    assert parse_uri("https://db.example/wiki_2") == ("https://db.example", "wiki_2")
    for bad in ["milvus://host:1", "milvus://host:1/bad-name", "ftp://h/c"]:
        with pytest.raises(RetrievalIndexError, match="milvus://HOST:PORT/COLLECTION"):
            parse_uri(bad)


def test_milvus_round_trip_in_every_mode(milvus, tmp_path):
    corpus = tmp_path / "c.jsonl"
    write_corpus([*PASSAGES, PASSAGES[0]], corpus)  # one duplicate: dropped on the way
    uri = f"{milvus}/hopqa_test"
    built = build_corpus_index(corpus, uri, "hybrid", engine="milvus", embedder=LexicalEmbedder(dim=64),
                               cache_dir=tmp_path / "cache", progress=False)
    assert built.size == len(PASSAGES) and built.meta["kind"] == "hybrid" and built.meta["complete"]
    for mode in ("bm25", "dense", "hybrid"):
        r = open_index(uri, embedder=LexicalEmbedder(dim=64), mode=mode)
        assert r.name.startswith(f"milvus-{mode}")
        hits = r.search("capital of France Paris", 3)
        assert hits[0].id == "p1", mode
        assert (hits[0].title, hits[0].text) == (PASSAGES[0].title, PASSAGES[0].text)
        assert r.search("", 3) == []
    bm25 = open_index(uri, mode="bm25")
    assert [h.id for h in bm25.search("edible fruit of the apple tree", 1)] == ["p7"]
    assert bm25.batch_search(["highest mountain", "river in Africa"], 1)[1][0].id == "p6"
    other = tmp_path / "other.jsonl"
    write_corpus(PASSAGES[:2], other)
    with pytest.raises(CorpusMismatchError):
        open_index(uri, mode="bm25", corpus=other)
    with pytest.raises(RetrievalIndexError, match="another corpus.*--overwrite"):
        build_corpus_index(other, uri, "bm25", engine="milvus", progress=False)
    replaced = build_corpus_index(other, uri, "bm25", engine="milvus", progress=False, overwrite=True)
    assert replaced.size == 2 and replaced.meta["kind"] == "bm25"
    with pytest.raises(RetrievalIndexError, match="no dense vectors"):
        MilvusRetriever(uri, mode="dense")
    with pytest.raises(RetrievalIndexError, match="no hopqa collection"):
        MilvusRetriever(f"{milvus}/nothing_here")


def test_a_load_run_again_reuses_the_embedding_cache(milvus, tmp_path):
    from tests.test_dense import CountingEmbedder

    corpus = tmp_path / "c.jsonl"
    write_corpus(PASSAGES, corpus)
    uri = f"{milvus}/hopqa_resume"
    first = CountingEmbedder()
    first.name = "counting"
    build_corpus_index(corpus, uri, "hybrid", engine="milvus", embedder=first, cache_dir=tmp_path / "cache",
                       progress=False, overwrite=True)
    again = CountingEmbedder()
    again.name = "counting"
    r = build_corpus_index(corpus, uri, "hybrid", engine="milvus", embedder=again, cache_dir=tmp_path / "cache",
                           progress=False, overwrite=True)
    assert first.batches == 1 and again.batches == 0 and r.size == len(PASSAGES)


def test_the_cli_checks_milvus_uris(tmp_path):
    from tests.test_cli import hopqa

    corpus = tmp_path / "c.jsonl"
    write_corpus(PASSAGES, corpus)
    r = hopqa("index", str(corpus), "--engine", "milvus", "--out", str(tmp_path / "dir"), home=tmp_path)
    assert r.returncode == 2 and "--out is then milvus://HOST:PORT/COLLECTION" in r.stderr
    r = hopqa("index", str(corpus), "--out", "milvus://127.0.0.1:1/x", home=tmp_path)
    assert r.returncode == 2 and "--engine milvus" in r.stderr


@pytest.mark.slow
def test_milvus_from_the_cli_with_the_real_embedder(milvus, tmp_path):
    """hopqa index --engine milvus --kind hybrid (MiniLM vectors), then hopqa ask over the
    collection in hybrid mode with SmolLM2: the trace names the Milvus retriever."""
    import json

    from tests.test_cli import SMOL, hopqa

    corpus = tmp_path / "c.jsonl"
    write_corpus(PASSAGES, corpus)
    uri = f"{milvus}/hopqa_cli"
    r = hopqa("index", str(corpus), "--engine", "milvus", "--kind", "hybrid", "--out", uri, "--overwrite",
              home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"indexed {len(PASSAGES)} passages" in r.stdout and "milvus-hybrid:all-MiniLM-L6-v2" in r.stdout
    r = hopqa("ask", "Which river flows through Paris?", "--index", uri, "--retriever", "dense", "--method",
              "retrieve-then-read", "--k", "2", "--llm", SMOL, "--json", home=tmp_path)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["passages"][0]["id"] == "p5"
    from tests.test_retrieval_cli import _retrievers

    assert _retrievers(answer) == {"milvus-dense:all-MiniLM-L6-v2"}


def test_milvus_reuses_the_vectors_of_a_dense_index_of_the_same_corpus(milvus, tmp_path):
    from tests.test_dense import CountingEmbedder

    corpus = tmp_path / "c.jsonl"
    write_corpus([*PASSAGES, PASSAGES[2]], corpus)  # a duplicate: both drop it the same way
    first, again = CountingEmbedder(), CountingEmbedder()
    build_corpus_index(corpus, tmp_path / "dense", "dense", embedder=first, cache_dir=tmp_path / "cache",
                       progress=False)
    build_corpus_index(corpus, f"{milvus}/hopqa_shared", "hybrid", engine="milvus", embedder=again,
                       cache_dir=tmp_path / "cache", progress=False, overwrite=True)
    assert first.batches == 1 and again.batches == 0


def test_connections_do_not_ping_an_idle_server(milvus):
    """pymilvus pings idle connections every 10 s; milvus-lite (gRPC's default policy) answers
    that with GOAWAY "too_many_pings" after a minute's idle, which failed the next client made
    for the same server (CI, stop 48). hopqa's connections ping only during calls."""
    from hopqa.retrieval.milvus import GRPC_OPTIONS, _client

    client, collection = _client(f"{milvus}/hopqa_idle")
    assert collection == "hopqa_idle" and GRPC_OPTIONS == {"grpc.keepalive_permit_without_calls": 0}
    assert client._handler._grpc_options == GRPC_OPTIONS
    assert isinstance(client.list_collections(), list)


def test_a_shared_connection_that_cannot_be_recovered_is_replaced_once(monkeypatch):
    import pymilvus

    from hopqa.retrieval.milvus import _client

    made: list[dict] = []

    class Client:
        def __init__(self, **kwargs):
            made.append(kwargs)
            if not kwargs.get("dedicated") or len(made) > 2:
                raise ConnectionError("Too many pings")

    monkeypatch.setattr(pymilvus, "MilvusClient", Client)
    client, _ = _client("milvus://127.0.0.1:1/c")
    assert isinstance(client, Client) and [m.get("dedicated", False) for m in made] == [False, True]
    with pytest.raises(RetrievalIndexError, match=r"cannot reach Milvus at http://127.0.0.1:1: ConnectionError"):
        _client("milvus://127.0.0.1:1/c")
    assert len(made) == 4
