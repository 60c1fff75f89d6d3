"""Presets (issue 33): named sets of a method's options, over its paper defaults, the same from
the Python API, the CLI and the service."""

from __future__ import annotations

import pytest

from hopqa.build import build_method
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import (
    METHODS,
    MethodError,
    get_method_class,
    method_config,
    method_presets,
    preset_options,
)
from hopqa.server.catalog import describe_method
from hopqa.server.jobs import RequestError, prepare
from hopqa.server.settings import ServiceSettings
from tests.test_server_api import QUESTION, retriever, retriever_for

pytest_plugins = ["fault_server"]


def test_a_preset_sets_its_options_over_the_defaults_and_given_options_win():
    assert method_config("hgot").step_answers is False  # the paper's
    assert method_config("hgot", preset="small-model").step_answers is True
    assert method_config("hgot", preset="small_model", step_answers=False).step_answers is False  # aliases, overrides
    assert method_config("hgot", preset="small-model", samples=4).samples == 4
    assert preset_options("hgot", "small-model") == {"step_answers": True, "draft_dependencies": True,
                                                     "rewrite_answers": True, "choice": True}
    assert preset_options("leapquery", "small-model") == {"gaps": "bridge", "rerank": "hybrid", "shots": 4,
                                                          "choice": True, "read_order": "question-first"}
    assert method_config("leapquery", preset="small-model").read_order == "question-first"
    assert method_config("leapquery").read_order == "rerank"  # the paper's
    with pytest.raises(MethodError, match=r"'retrieve-then-read' has no preset 'small-model' \(its presets: none\)"):
        method_config("retrieve-then-read", preset="small-model")
    with pytest.raises(MethodError, match=r"no preset 'tiny' \(its presets: small-model\)"):
        method_config("hgot", preset="tiny")


def test_a_preset_option_goes_with_the_option_it_needs_when_that_one_is_turned_off():
    """Self-DC's ``shots`` and ``brackets`` act only with ``chain`` (``metadata={"needs":
    "chain"}``): ``--preset small-model --set chain=false`` drops the preset's values of both
    (the method would refuse them), from the Python API and the service alike; set explicitly,
    they stay and the method refuses them."""
    from hopqa.methods.self_dc import SelfDC

    cfg = method_config("self-dc", preset="small-model", chain=False)
    assert (cfg.chain, cfg.shots, cfg.brackets, cfg.choice, cfg.alpha) == (False, 0, False, True, 0.5)
    SelfDC(ScriptedLLM(), retriever(), cfg.update(confidence="verb"))  # accepted: nothing needs the chain
    kept = method_config("self-dc", preset="small-model", chain=False, shots=2)
    assert (kept.shots, kept.brackets) == (2, False)
    with pytest.raises(MethodError, match="set chain=true too"):
        SelfDC(ScriptedLLM(), retriever(), kept.update(confidence="verb"))
    assert method_config("self-dc", preset="small-model").shots == 4  # the chain on: the preset's
    settings = ServiceSettings(llm=ScriptedLLM(replies=lambda r: "x"), retriever_for=retriever_for(retriever()))
    plan = prepare(settings, QUESTION, "self-dc", {"preset": "small-model", "chain": False})
    assert plan.options == {"preset": "small-model", "chain": False}
    from argparse import Namespace

    from hopqa.cli import _method_options  # --preset small-model --set chain=false: accepted, as given
    args = Namespace(preset="small-model", k=None, set=["chain=false"], method="self-dc")
    assert _method_options("self-dc", args) == {"preset": "small-model", "chain": False}


def test_an_option_that_needs_another_is_refused_without_it_for_any_method():
    """The check is the method base's (``check_dependent_options``), driven by the ``needs``
    metadata alone: a method of its own gets it with no code; an option left at its default is
    accepted whatever the option it needs."""
    from dataclasses import dataclass, field

    from hopqa.methods.base import Method, MethodConfig

    @dataclass
    class ToyConfig(MethodConfig):
        deep: bool = False
        depth: int = field(default=1, metadata={"range": (1, 9), "needs": "deep"})
        label: str = field(default="", metadata={"needs": "deep"})

    class Toy(Method):
        name = "toy"
        Config = ToyConfig

    Toy(ScriptedLLM(), ToyConfig())
    Toy(ScriptedLLM(), ToyConfig(deep=True, depth=3, label="x"))
    with pytest.raises(MethodError, match=r"'toy''s option depth=3 acts only with deep=true: "
                                          r"set deep=true too \(or depth=1\)"):
        Toy(ScriptedLLM(), ToyConfig(depth=3))
    with pytest.raises(MethodError, match=r"option label=x .* \(or label=\)"):
        Toy(ScriptedLLM(), ToyConfig(label="x"))
    from hopqa.methods.self_dc import SelfDC, SelfDCConfig

    for option, fix in (({"shots": 2}, "shots=0"), ({"brackets": True}, "brackets=false")):
        with pytest.raises(MethodError, match=rf"set chain=true too \(or {fix}\)"):
            SelfDC(ScriptedLLM(), retriever(), SelfDCConfig(confidence="verb", **option))


def test_every_needs_names_a_bool_option_of_the_same_config():
    for name in METHODS:
        config = get_method_class(name).Config
        for f in config.__dataclass_fields__.values():
            if "needs" in f.metadata:
                assert config.__dataclass_fields__[f.metadata["needs"]].type in (bool, "bool"), (name, f.name)


def test_every_preset_is_a_valid_config_and_documented():
    for name in METHODS:
        for key, preset in method_presets(name).items():
            assert key == key.lower() and preset.options and preset.doc, (name, key)
            cfg = method_config(name, preset=key)
            assert all(getattr(cfg, k) == v for k, v in preset.options.items())
            assert preset.options.keys() <= {f for f in get_method_class(name).Config.__dataclass_fields__}


def test_build_method_takes_a_preset():
    llm = ScriptedLLM(replies=lambda r: "x")
    assert build_method("hgot", llm, retriever(), preset="small-model").config.step_answers
    with pytest.raises(MethodError, match="has no preset"):
        build_method("cot", llm, preset="small-model")


def test_the_service_takes_a_preset_among_the_options_and_lists_them():
    settings = ServiceSettings(llm=ScriptedLLM(replies=lambda r: "x"), retriever_for=retriever_for(retriever()))
    plan = prepare(settings, QUESTION, "hgot", {"preset": "Small-Model", "samples": 2})
    assert plan.options == {"preset": "small-model", "samples": 2}
    with pytest.raises(RequestError, match="'retrieve-then-read' has no preset 'small-model'"):
        prepare(settings, QUESTION, "retrieve-then-read", {"preset": "small-model"})
    with pytest.raises(RequestError, match="option preset must be text"):
        prepare(settings, QUESTION, "hgot", {"preset": ["small-model"]})
    hgot = describe_method("hgot", settings)
    assert hgot["presets"]["small-model"]["options"] == {"step_answers": True, "draft_dependencies": True,
                                                         "rewrite_answers": True, "choice": True}
    assert hgot["presets"]["small-model"]["doc"]
    assert describe_method("cot", settings)["presets"] == {}


def test_cli_preset_in_methods_ask_and_eval(tmp_path, capsys, fault_server):
    import json

    from hopqa.cli import main

    assert main(["methods", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "preset small-model: step_answers=True, draft_dependencies=True, rewrite_answers=True, choice=True " \
           "(INFER's Predict reads" in out
    nowhere = ["--llm", "openai:x@http://127.0.0.1:9", "--home", str(tmp_path)]
    assert main(["ask", "--method", "cot", "--preset", "small-model", *nowhere, "What?"]) == 2
    assert "--preset small-model: the method 'cot' has no such preset (its presets: none)" in capsys.readouterr().err
    # an evaluation: the methods that have it take it, the others run with their defaults, said so
    assert main(["eval", "--dataset", "hotpotqa", "--limit", "1", "--method", "cot,direct", "--preset", "small-model",
                 *nowhere, "--out", str(tmp_path / "none")]) == 2  # none of them has it
    s = fault_server()
    assert main(["eval", "--dataset", "hotpotqa", "--limit", "1", "--method", "retrieve-then-read,hgot",
                 "--preset", "small-model", "--set", "hgot.samples=1", "--set", "hgot.depth=1", "--no-progress",
                 "--llm", f"openai:fake@{s.url}?timeout=30", "--home", str(tmp_path), "--out", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    assert "the method 'retrieve-then-read' has no preset 'small-model': it runs with its defaults" in err
    base = tmp_path / "runs" / "hotpotqa-dev-distractor"
    hgot = json.loads((base / "hgot" / "config.json").read_text())
    assert hgot["preset"] == "small-model" and hgot["options"]["step_answers"] is True and hgot["options"]["samples"] == 1
    assert "preset" not in json.loads((base / "retrieve-then-read" / "config.json").read_text())


def test_a_method_that_needs_logprobs_gets_an_embedded_model_that_has_them(capsys):
    from hopqa.build import spec_with
    from hopqa.cli import _spec_for
    from hopqa.llm.base import LOGPROBS

    assert get_method_class("self-dc").needs(method_config("self-dc", preset="small-model")) == {LOGPROBS}
    assert get_method_class("self-dc").needs(method_config("self-dc")) == frozenset()  # verbal confidence
    assert get_method_class("hgot").needs(method_config("hgot")) == frozenset()
    assert spec_with("embedded:qwen2.5-1.5b", {LOGPROBS}) == "embedded:qwen2.5-1.5b?logits_all=1"
    assert spec_with("embedded:x?n_ctx=4096", {LOGPROBS}) == "embedded:x?n_ctx=4096&logits_all=1"
    assert spec_with("embedded:x?logits_all=0", {LOGPROBS}) == "embedded:x?logits_all=0"  # the user's own choice
    assert spec_with("openai:m@http://h", {LOGPROBS}) == "openai:m@http://h"
    assert spec_with("embedded:x", set()) == "embedded:x"
    assert _spec_for("embedded:x", {"self-dc": {"preset": "small-model"}, "hgot": {}}) == "embedded:x?logits_all=1"
    assert "loaded as embedded:x?logits_all=1 (logprobs for self-dc, hgot)" in capsys.readouterr().err
    assert _spec_for("embedded:x", {"self-dc": {}}) == "embedded:x" and not capsys.readouterr().err


@pytest.mark.slow
def test_the_self_dc_preset_runs_on_the_default_kind_of_model(data_dir, tmp_path):
    """``hopqa.pipeline("self-dc", preset="small-model")`` on an embedded spec without
    ``logits_all``: the model is loaded with it, and the confidence is a token probability."""
    import hopqa
    from hopqa.datasets import load_dataset
    from hopqa.retrieval.pool import CandidatePool

    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    qa = hopqa.pipeline("self-dc", llm="embedded:smollm2-135m", retriever=CandidatePool(ex.paragraphs),
                        home=tmp_path, cache=False, preset="small-model", max_tokens=16, depth=1)
    try:
        ans = qa.answer(ex.question)
        assert ans.error is None, ans.error
        (conf, *_) = ans.trace.root.find("confidence")
        assert conf.llm_calls[0]["logprobs"][0]
    finally:
        qa.llm.close()
