"""Over HTTP a method option never reaches the server's files and never asks for work without end
(issue 30, items 1 and 3): resource options (``hopqa.options``: datasets, directories, models,
URLs) take only names the operator allows, numeric options keep under the service's caps, both
refused in ``prepare`` before any model call or file access."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hopqa.cli import UsageError, _option_limits, main
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.base import METHODS, get_method_class
from hopqa.options import resource_fields
from hopqa.server.catalog import catalog, numeric_options, resource_options
from hopqa.server.jobs import RequestError, prepare
from hopqa.server.settings import DEFAULT_OPTION_CAPS, ServiceSettings, default_allowed_names
from tests.test_server_api import QUESTION, client, retriever, retriever_for

#: Values that reach a file, a directory or a host if taken as they are.
PAYLOADS = ["../../etc/passwd", "/etc/shadow", "file:///etc/passwd", "~/x", "http://169.254.169.254/",
            "hotpotqa:train/../../../escape", "..", "C:\\Windows\\win.ini", "\\\\server\\share", "a\x00b",
            "./demos", "file:passwd", "cross-encoder/../../etc"]


def every_resource_option() -> list[tuple[str, str]]:
    return [(name, option) for name in sorted(METHODS)
            for option in resource_fields(get_method_class(name).Config)]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def scripted() -> ScriptedLLM:
    return ScriptedLLM(replies=lambda request: "Stanley")


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A working directory and a home of its own, empty: nothing may appear in either."""
    cwd = tmp_path / "cwd" / "deeper"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    home = tmp_path / "home"
    home.mkdir()
    return tmp_path, home


def test_the_resource_options_are_marked():
    assert resource_options() == {"bootstrap_dataset": "dataset", "demo_cache": "directory", "rerank": "model"}
    assert ("hgot", "bootstrap_dataset") in every_resource_option()
    assert ("leapquery", "rerank") in every_resource_option()


@pytest.mark.parametrize(("method", "option"), every_resource_option())
def test_every_resource_option_refuses_every_traversal_payload(world, method, option):
    tmp_path, home = world
    before = tree(tmp_path)
    llm = scripted()
    # even an operator listing the payloads does not let a path through
    listed = {key: (*names, *PAYLOADS) for key, names in default_allowed_names().items()}
    c = client(llm, home=home, allowed_names=listed)
    payloads = [*PAYLOADS, str(tmp_path / "made" / "x.jsonl"), str(tmp_path / "made")]
    for payload in payloads:
        r = c.post("/v1/answer", json={"question": QUESTION, "method": method, "options": {option: payload}})
        assert r.status_code == 422, (payload, r.text)
        assert option in r.json()["detail"]
        chat = c.post("/v1/chat/completions", json={"model": f"hopqa/{method}",
                                                    "messages": [{"role": "user", "content": QUESTION}],
                                                    "hopqa": {"options": {option: payload}}})
        assert chat.status_code == 400, (payload, chat.text)
        assert option in chat.json()["error"]["message"]
    assert llm.requests == []
    assert tree(tmp_path) == before


def test_a_refusal_says_nothing_about_whether_a_path_exists(world):
    tmp_path, home = world
    there = tmp_path / "there.jsonl"
    there.write_text('{"question": "q", "answer": "a"}\n')
    c = client(scripted(), home=home)
    texts = []
    for path in (there, tmp_path / "nowhere.jsonl"):
        r = c.post("/v1/answer", json={"question": QUESTION, "method": "hgot",
                                       "options": {"bootstrap_dataset": str(path)}})
        assert r.status_code == 422
        texts.append(r.json()["detail"].replace(str(path), "PATH"))
    assert texts[0] == texts[1]


def test_allowed_names_and_the_defaults_pass():
    settings = ServiceSettings(llm=scripted(), retriever_for=retriever_for(retriever()))
    assert prepare(settings, QUESTION, "hgot", {"bootstrap_dataset": "musique:train"}).options == \
        {"bootstrap_dataset": "musique:train"}
    assert prepare(settings, QUESTION, "hgot", {"bootstrap_dataset": "hotpotqa"}).options
    assert prepare(settings, QUESTION, "hgot", {"demo_cache": ""}).options == {"demo_cache": ""}  # the default
    for name in ("auto", "llm", "hybrid", "bi-encoder", "cross-encoder/ms-marco-MiniLM-L-6-v2"):
        assert prepare(settings, QUESTION, "leapquery", {"rerank": name}).options["rerank"] == name
    # a name the operator did not list is refused, the list shown
    with pytest.raises(RequestError, match="allows: .*hotpotqa:train.*--allow-option bootstrap_dataset=NAME"):
        prepare(settings, QUESTION, "hgot", {"bootstrap_dataset": "mine.jsonl"})
    listed = ServiceSettings(llm=scripted(), retriever_for=retriever_for(retriever()),
                             allowed_names={"bootstrap_dataset": ("mine.jsonl",)})
    assert prepare(listed, QUESTION, "hgot", {"bootstrap_dataset": "mine.jsonl"}).options
    with pytest.raises(RequestError, match="rerank"):  # not listed there: nothing but the default
        prepare(listed, QUESTION, "leapquery", {"rerank": "hybrid"})
    with pytest.raises(RequestError, match="must be text"):
        prepare(settings, QUESTION, "leapquery", {"rerank": ["/etc"]})


def test_unbounded_numbers_are_refused_before_any_call(world):
    _, home = world
    llm = scripted()
    c = client(llm, home=home)
    for method, options in [("hgot", {"max_steps": 10**9}), ("hgot", {"samples": 1000000}),
                            ("cot", {"max_tokens": 10**12}), ("leapquery", {"votes": 10**6}),
                            ("tor", {"widths": "1000,1000"}), ("self-dc", {"depth": 50}),
                            ("self-ask", {"max_steps": "100000"})]:
        r = c.post("/v1/answer", json={"question": QUESTION, "method": method, "options": options})
        assert r.status_code == 422, (method, options, r.text)
        assert next(iter(options)) in r.json()["detail"]
    assert llm.requests == []


def test_the_service_caps_name_the_option_the_cap_and_the_flag(world):
    _, home = world
    llm = scripted()
    c = client(llm, home=home)
    r = c.post("/v1/answer", json={"question": QUESTION, "method": "self-ask", "options": {"max_steps": 17}})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert "max_steps" in detail and "caps it at 16" in detail and "--cap max_steps=N" in detail
    chat = c.post("/v1/chat/completions", json={"model": "hopqa/hgot", "messages": [{"role": "user", "content": QUESTION}],
                                                "hopqa": {"options": {"samples": 9}}})
    assert chat.status_code == 400 and "caps it at 8" in chat.json()["error"]["message"]
    r = c.post("/v1/answer", json={"question": QUESTION, "method": "tor", "options": {"widths": "5,6"}})
    assert r.status_code == 422 and "widths" in r.json()["detail"]
    assert llm.requests == []


def test_the_operator_moves_the_caps():
    settings = ServiceSettings(llm=scripted(), retriever_for=retriever_for(retriever()),
                               option_caps={**DEFAULT_OPTION_CAPS, "max_steps": 32, "max_tokens": 16})
    assert prepare(settings, QUESTION, "self-ask", {"max_steps": 17, "max_tokens": 16}).options["max_steps"] == 17
    with pytest.raises(RequestError, match="max_tokens is 256 \\(the method's default"):
        prepare(settings, QUESTION, "cot", {})
    assert prepare(settings, QUESTION, "cot", {"max_tokens": 8}).options == {"max_tokens": 8}
    with pytest.raises(RequestError, match="between 1 and 100"):  # the method's own range stays
        prepare(settings, QUESTION, "self-ask", {"max_steps": 101})


def test_every_builtin_default_is_within_the_default_caps():
    settings = ServiceSettings(llm=scripted(), retriever_for=retriever_for(retriever()))
    for name in sorted(METHODS):
        prepare(settings, QUESTION, name, {})
    assert set(DEFAULT_OPTION_CAPS) <= numeric_options()


def test_the_catalog_shows_ranges_caps_and_resources(world):
    _, home = world
    methods = {m["name"]: m for m in client(home=home).get("/v1/methods").json()["methods"]}
    for method in methods.values():
        for option in method["options"]:
            if option["kind"] in ("int", "float") or option.get("items"):
                low, high = option["range"]
                assert low is not None and high is not None, (method["name"], option)
    hgot = {o["name"]: o for o in methods["hgot"]["options"]}
    assert hgot["bootstrap_dataset"]["resource"] == "dataset" and hgot["demo_cache"]["resource"] == "directory"
    assert hgot["max_steps"]["range"] == [1, 100]
    settings = ServiceSettings(llm=scripted(), retriever_for=retriever_for(retriever()))
    served = {m["name"]: {o["name"]: o for o in m["options"]} for m in catalog("cot", settings)["methods"]}
    assert served["hgot"]["samples"]["cap"] == 8 and served["hgot"]["demo_cache"]["allowed"] == []
    assert "hotpotqa:train" in served["hgot"]["bootstrap_dataset"]["allowed"]
    assert "llm" in served["leapquery"]["rerank"]["allowed"]
    assert served["tor"]["widths"]["cap"] == 5 and served["tor"]["widths"]["items"] == "int"


# -- hopqa serve's flags ---------------------------------------------------------------------------------
def test_allow_option_adds_names_and_refuses_paths_and_directories():
    allowed, caps = _option_limits(["bootstrap_dataset=mine.jsonl, theirs", "rerank=BAAI/bge-reranker-large"],
                                   ["max_steps=4", "samples=none", "widths=3"])
    assert allowed["bootstrap_dataset"][-2:] == ("mine.jsonl", "theirs")
    assert "hotpotqa:train" in allowed["bootstrap_dataset"] and "BAAI/bge-reranker-large" in allowed["rerank"]
    assert caps["max_steps"] == 4 and "samples" not in caps and caps["widths"] == 3
    assert _option_limits(["rerank="], None)[0]["rerank"] == ()
    for bad in ("bootstrap_dataset=/etc/shadow", "bootstrap_dataset=../x", "rerank=/etc", "rerank=~/model",
                "demo_cache=cache", "nonsense=x", "bootstrap_dataset", "rerank=http://host/model"):
        with pytest.raises(UsageError):
            _option_limits([bad], None)
    for bad in ("max_steps=-1", "max_steps=x", "nonsense=3", "max_steps"):
        with pytest.raises(UsageError):
            _option_limits(None, [bad])


def test_serve_refuses_a_path_before_loading_a_model(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--allow-option", "rerank=/etc"]) == 2
    err = capsys.readouterr().err
    assert "--allow-option rerank=/etc" in err and "never paths" in err
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = capsys.readouterr().out
    assert "--allow-option" in text and "--cap" in text
    assert os.listdir(tmp_path) == []
