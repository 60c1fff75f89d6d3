"""The one way to build things (hopqa.build): components declared by methods, demonstrations as
inputs, one retriever per method, presets instead of subclasses, the environment read in one place."""

from __future__ import annotations

import ast
import math
import os
from pathlib import Path

import pytest

import hopqa
from hopqa.build import BuildError, build_method, corpus_retriever, takes
from hopqa.datasets import few_shot_demos
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods import METHODS, MethodError, get_method_class, method_config
from hopqa.methods.base import FewShotMethod, RetrievingMethod
from hopqa.methods.gensco import GenSco, GenScoConfig
from hopqa.retrieval.pool import CandidatePool, UnboundPool
from hopqa.types import Passage

PACKAGE = Path(hopqa.__file__).parent
POOL = CandidatePool([Passage("a", "Van Hook Township", "Van Hook Township is in Mountrail County."),
                      Passage("b", "Stanley", "Stanley is the county seat of Mountrail County.")])


def test_every_method_declares_what_its_constructor_takes():
    """The builder reads ``components``; each one is a keyword of the constructor (so a declared
    component can always be given) and retrieving methods are RetrievingMethods."""
    import inspect

    for name in METHODS:
        cls = METHODS[name]
        params = set(inspect.signature(cls.__init__).parameters) - {"self", "llm", "config"}
        assert params == set(cls.components), name
        assert ("retriever" in cls.components) == issubclass(cls, RetrievingMethod), name
        assert ("demos" in cls.components) == issubclass(cls, FewShotMethod), name


def test_build_method_gives_few_shot_methods_their_demonstrations():
    method = build_method("ircot", ScriptedLLM(replies=[]), POOL, shots=3)
    assert method.demos == tuple(few_shot_demos(3))
    assert build_method("self-ask", ScriptedLLM(replies=[]), POOL, shots=0).demos == ()
    mine = few_shot_demos(5)[3:]
    assert build_method("react", ScriptedLLM(replies=[]), POOL, demos=mine, shots=2).demos == tuple(mine)
    with pytest.raises(MethodError, match="shots=4 demonstrations"):  # built directly: they are an input
        get_method_class("ircot")(ScriptedLLM(replies=[]), POOL)


def test_components_a_method_does_not_take_are_errors_except_the_retriever():
    llm = ScriptedLLM(replies=[])
    with pytest.raises(MethodError, match="takes no judge"):
        build_method("ircot", llm, POOL, judge=object())
    assert build_method("direct", llm, POOL).components == frozenset()  # any method builds the same way
    assert takes("gensco-stop", "scorer") and takes("hgot", "demo_set") and not takes("cot", "retriever")


def test_a_retrieving_method_has_one_retriever():
    llm = ScriptedLLM(replies=lambda r: "Mountrail County")
    unbound = build_method("retrieve-then-read", llm)
    assert isinstance(unbound.retriever.inner, UnboundPool)
    assert "built without a retriever" in unbound.answer("Where is Van Hook Township?").error
    bound = unbound.with_retriever(POOL)
    ans = bound.answer("Where is Van Hook Township?")
    assert ans.error is None and ans.answer == "Mountrail County" and ans.passages
    assert isinstance(unbound.retriever.inner, UnboundPool)  # the original is untouched
    assert bound.llm is unbound.llm and bound.config is unbound.config
    with pytest.raises(MethodError, match="needs a retriever"):
        unbound.with_retriever(None)  # type: ignore[arg-type]


def test_gensco_variants_are_presets_of_one_class():
    for name, variant in [("gensco-max", "max"), ("gensco-stop", "stop"), ("gensco-no-qd", "no-qd")]:
        assert METHODS[name] is GenSco and method_config(name).variant == variant
        assert METHODS.preset(name) == {"variant": variant} and METHODS.doc(name).startswith("GenSco-")
        method = build_method(name, ScriptedLLM(replies=[], scorer=lambda c, t: [-1.0]), POOL, shots=0)
        assert method.name == name and method.config.variant == variant
    assert method_config("gensco-stop", variant="max").variant == "max"  # a preset is only a default
    assert GenSco(ScriptedLLM(replies=[], scorer=lambda c, t: [-1.0]), POOL,
                  GenScoConfig(variant="stop", shots=0)).name == "gensco-stop"


def test_literal_modes_are_checked_once_with_their_choices():
    with pytest.raises(MethodError, match="one of 'max', 'stop', 'no-qd'"):
        GenScoConfig(variant="best")
    with pytest.raises(MethodError, match="'verb', 'prob'"):
        method_config("self-dc", confidence="vibes")
    with pytest.raises(MethodError, match="'sampling', 'knn'"):
        method_config("hgot", demo_selection="nearest")


def test_corpus_retriever_errors_are_build_errors(tmp_path):
    with pytest.raises(BuildError, match="no index directory"):
        corpus_retriever(index=tmp_path / "missing")
    with pytest.raises(BuildError, match="no corpus file"):
        corpus_retriever(corpus=tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(BuildError, match="empty.jsonl"):
        corpus_retriever(corpus=tmp_path / "empty.jsonl", home=tmp_path / "home")


def test_pipeline_builds_through_the_builder(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "Van Hook Township", "text": "Van Hook Township is in Mountrail County."}\n')
    qa = hopqa.pipeline("ircot", llm=ScriptedLLM(replies=lambda r: "So the answer is: Mountrail County."),
                        corpus=corpus, home=tmp_path / "home", shots=1, k=1, max_steps=1)
    assert len(qa.demos) == 1 and qa.retriever.inner.size == 1
    ans = qa.answer("Where is Van Hook Township?")
    assert ans.error is None and ans.passages[0].id == "a"


def _environment_uses(path: Path) -> list[str]:
    """Where a module reads or writes the process environment (``os.environ``, ``os.getenv``,
    ``os.putenv``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "unsetenv") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_only_the_config_module_touches_the_environment():
    uses = [u for p in sorted(PACKAGE.rglob("*.py")) if p.name != "config.py" or p.parent != PACKAGE
            for u in _environment_uses(p)]
    assert uses == []
    assert _environment_uses(PACKAGE / "config.py")  # the check can fail: it finds config's own reads


def test_the_cli_leaves_the_environment_as_it_found_it(tmp_path, capsys):
    from hopqa.cli import main

    before = dict(os.environ)
    assert main(["datasets", "--home", str(tmp_path), "--data-dir", str(tmp_path)]) == 0
    assert dict(os.environ) == before


def test_gensco_answers_with_the_evaluated_datasets_own_shots():
    """§4.3: the answer prompt's demonstrations come from the evaluated dataset's training data,
    2 / 4 / 3 of them for 2Wiki / AdvHotpot / MuSiQue; a set ``shots`` wins; elsewhere MuSiQue
    and 2Wiki ones alternate."""
    from hopqa.build import resolve_options
    from hopqa.datasets import answer_demos

    scorer = ScriptedLLM(replies=[], scorer=lambda c, t: [-1.0])
    for dataset, n in [("musique", 3), ("adversarial_hotpotqa", 4), ("2wikimultihopqa", 2)]:
        method = build_method("gensco-stop", scorer, POOL, dataset=dataset)
        assert method.config.shots == n and method.demos == tuple(answer_demos(dataset, n))
        assert all(d.source.startswith(dataset + ":") and d.passages for d in method.demos)
    assert build_method("gensco-max", scorer, POOL, dataset="musique", shots=1).demos == tuple(answer_demos("musique", 1))
    assert build_method("gensco-max", scorer, POOL).demos == tuple(few_shot_demos(2))
    assert build_method("gensco-max", scorer, POOL, dataset="bamboogle").demos == tuple(few_shot_demos(2))
    assert resolve_options("gensco-max", {}, "musique") == {"shots": 3}
    assert resolve_options("ircot", {}, "musique") == {}


def test_every_entry_point_assembles_through_one_recipe(tmp_path, monkeypatch, capsys):
    """``hopqa.pipeline``, ``hopqa ask`` and the service's jobs all build through
    ``hopqa.build.assemble``: a method option given to each arrives in its ``Recipe``."""
    from hopqa import build
    from hopqa.cli import main
    from hopqa.server.jobs import Plan
    from hopqa.server.jobs import build as service_build
    from hopqa.server.settings import ServiceSettings

    recipes = []
    real = build.assemble

    def recording(recipe, note=None):
        recipes.append(recipe)
        return real(recipe, note)

    monkeypatch.setattr(build, "assemble", recording)
    loaded = []
    monkeypatch.setattr(build, "load_model", lambda spec, **kw: loaded.append(spec) or ScriptedLLM(
        replies=lambda r: "So the answer is: Mountrail County."))
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "Van Hook Township", "text": "Van Hook Township is in Mountrail County."}\n')

    qa = hopqa.pipeline("ircot", llm="embedded:smollm2-135m", corpus=corpus, home=tmp_path / "h", max_steps=1, k=1)
    assert qa.answer("Where is Van Hook Township?").error is None
    assert main(["ask", "--method", "ircot", "--llm", "embedded:smollm2-135m", "--corpus", str(corpus),
                 "--home", str(tmp_path / "h"), "--set", "max_steps=1", "--k", "1", "--quiet",
                 "Where is Van Hook Township?"]) == 0
    assert capsys.readouterr().out.strip() == "Mountrail County"
    settings = ServiceSettings(llm=ScriptedLLM(replies=lambda r: "x"), retriever_for=lambda kind: POOL,
                               home=tmp_path / "h")
    method = service_build(settings, Plan(question="q", method="ircot", options={"max_steps": 1, "k": 1}))
    assert method.config.max_steps == 1
    assert [r.name for r in recipes] == ["ircot"] * 3
    assert all(r.options["max_steps"] == 1 and r.options["k"] == 1 for r in recipes)
    assert loaded == ["embedded:smollm2-135m"] * 2  # the service's model is loaded once, at its start


def test_assemble_checks_the_method_and_its_options_before_loading_anything(tmp_path, monkeypatch):
    from hopqa import build

    monkeypatch.setattr(build, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    monkeypatch.setattr(build, "corpus_retriever", lambda *a, **k: pytest.fail("a corpus was indexed"))
    with pytest.raises(MethodError, match="k"):
        build.assemble(build.Recipe("ircot", llm="embedded:smollm2-135m", options={"k": 0}, home=tmp_path))
    with pytest.raises(MethodError):
        build.assemble(build.Recipe("no-such-method", home=tmp_path))


def test_assemble_puts_the_llm_judge_behind_the_corpus_retriever(tmp_path):
    from hopqa.build import Recipe, assemble
    from hopqa.retrieval.rerank import RerankingRetriever

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "A", "text": "alpha beta"}\n{"id": "b", "title": "B", "text": "beta"}\n')
    llm = ScriptedLLM(replies=lambda r: "Yes")
    method = assemble(Recipe("retrieve-then-read", llm=llm, corpus=corpus, rerank="llm", rerank_depth=2,
                             home=tmp_path))
    reranked = method.retriever.inner  # (the method traces its retriever)
    assert isinstance(reranked, RerankingRetriever) and reranked.depth == 2 and "llm" in reranked.name.lower()
    own = assemble(Recipe("retrieve-then-read", llm=llm, own_paragraphs=True, home=tmp_path))
    assert isinstance(own.retriever.inner, UnboundPool)
    scorer = ScriptedLLM(replies=lambda r: "Yes", scorer=lambda c, x: [0.0 if x.startswith("9") else -5.0])
    expected = assemble(Recipe("retrieve-then-read", llm=scorer, corpus=corpus, rerank="llm-expected",
                               rerank_depth=2, home=tmp_path)).retriever.inner
    assert isinstance(expected, RerankingRetriever) and "llm-expected" in expected.name
    p9 = 1 / (1 + 10 * math.exp(-5.0))  # the rating 9 five nats likelier than each other one
    assert [p.score for p in expected.search("beta", k=2)] == pytest.approx([p9 * (9 + 46 * math.exp(-5.0))] * 2)


def test_the_cli_builds_its_corpus_retriever_and_llm_reranker_through_the_recipe(tmp_path):
    """``hopqa eval --setting open`` and ``hopqa serve`` load their model after the corpus and
    add the LLM judge then; both come from ``Recipe`` (``cli._corpus_recipe``), not a copy."""
    import argparse

    from hopqa import cli
    from hopqa.build import Recipe
    from hopqa.retrieval.rerank import RerankingRetriever

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "A", "text": "alpha beta"}\n{"id": "b", "title": "B", "text": "beta"}\n')
    args = argparse.Namespace(index=None, corpus=str(corpus), retriever="bm25", rerank="llm", rerank_depth=2,
                              home=str(tmp_path / "h"))
    recipe = cli._corpus_recipe(args)
    assert recipe == Recipe(corpus=str(corpus), search="bm25", rerank="llm", rerank_depth=2, home=str(tmp_path / "h"))
    plain = cli._retriever(args)
    assert not isinstance(plain, RerankingRetriever)  # the judge needs the model, loaded later
    judged = cli._llm_reranked(plain, args, ScriptedLLM(replies=lambda r: "Yes"))
    assert isinstance(judged, RerankingRetriever) and judged.depth == 2
    assert [p.id for p in judged.search("alpha", 1)] == ["a"]
    assert cli._llm_reranked(None, args, ScriptedLLM(replies=lambda r: "Yes")) is None
    args.rerank = None
    assert cli._llm_reranked(plain, args, ScriptedLLM(replies=lambda r: "Yes")) is plain


def test_pipeline_sets_an_option_named_like_its_own_keywords_through_method_options(tmp_path):
    """``rerank=`` puts a reranker behind the retriever; LeapQuery's own ``rerank`` option is
    set through ``method_options`` (keyword options still win over it)."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "A", "text": "alpha beta"}\n')
    llm = ScriptedLLM(replies=lambda r: "x")
    qa = hopqa.pipeline("leapquery", llm=llm, corpus=corpus, home=tmp_path / "h", method_options={"rerank": "hybrid",
                                                                                                   "votes": 3}, votes=1)
    assert qa.config.rerank == "hybrid" and qa.config.votes == 1
    assert "hybrid" in qa.reranker.name.lower()
    plain = hopqa.pipeline("leapquery", llm=llm, corpus=corpus, home=tmp_path / "h", rerank="hybrid")
    assert plain.config.rerank != "hybrid"  # the retriever's reranker, not the method's option
