"""The web page of ``hopqa serve`` (``hopqa/server/static``) in a real browser.

Headless Chromium (Debian's ``chromium``) driven by Selenium through Debian's ``chromedriver``
(``make test`` installs both where missing; Selenium Manager is never asked to download
anything). The service runs for real: uvicorn in a thread serving ``create_app`` with a scripted
LLM and a scripted retriever (fast tests), or with the embedded SmolLM2 and the demo index (the
slow test). Stored traces of the embedded Qwen are shown the way a user sees them, and
pictured: into a temporary folder, or, under ``make screenshots`` (``HOPQA_SCREENSHOTS=docs``),
as the docs' pictures (``make test`` never rewrites a tracked file).

Without a browser, a driver or Selenium the tests are skipped, saying what is missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hopqa.evaluation.runner import evaluate
from hopqa.llm.scripted import ScriptedLLM
from hopqa.server import ServiceSettings, create_app
from hopqa.types import Example, Passage
from tests.scripted_retriever import ScriptedRetriever
from tests.server_world import self_ask_llm

REPO = Path(__file__).resolve().parent.parent

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'
PASSAGES = {
    "a": Passage("a", "Van Hook Township", "Van Hook Township is a township in Mountrail County, North Dakota."),
    "b": Passage("b", 'Stanley <img src=x onerror="window.__xss=1">',
                 f"Stanley is a city in and the county seat of Mountrail County. {XSS}"),
}
QUESTION = "What is the seat of the county where Van Hook Township is located?"


# -- the browser -------------------------------------------------------------------------------------
def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
        if found:
            return found
    return None


def _missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium; it is in hopqa's dev extra)"
    if _find("chromium", "chromium-browser") is None:
        return "no Chromium browser (apt-get install chromium chromium-driver; make test installs it)"
    if _find("chromedriver") is None:
        return "no chromedriver (apt-get install chromium-driver; make test installs it)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _missing()
    if reason:
        pytest.skip(f"browser tests skipped: {reason}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager: never download a browser or a driver
    options = webdriver.ChromeOptions()
    options.binary_location = _find("chromium", "chromium-browser")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1400", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=_find("chromedriver")), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(settings: ServiceSettings) -> Iterator[str]:
    """``create_app(settings)`` served by uvicorn in a thread; yields its base URL."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > end or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(10)


def wait(driver, condition, timeout: float = 20.0, message: str = ""):
    """Wait until ``condition(driver)``; an element replaced while it was read (the page
    re-renders as events come) counts as not yet."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: condition(d), message)


def css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def one(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def click(driver, element) -> None:
    """Scroll ``element`` into view and click it (a real click: the element must be visible)."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def page_errors(driver) -> list[str]:
    """Errors the page logged (a JavaScript exception, a failed load other than a deliberate 4xx)."""
    return [e["message"] for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and "the server responded with a status of 4" not in e["message"]]


def select(driver, selector: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(one(driver, selector)).select_by_value(value)


def close_detail(driver) -> None:
    click(driver, one(driver, "#detail-close"))
    wait(driver, lambda d: not one(d, "#detail").get_attribute("open"), 5, "the dialog did not close")


# -- the service with a scripted model ---------------------------------------------------------------------
class EveryQuery(dict):
    """A ScriptedRetriever table that answers every query with both passages."""

    def get(self, key, default=None):
        return "ab"


def settings(llm=None, **kw) -> ServiceSettings:
    search = ScriptedRetriever(EveryQuery(), PASSAGES)

    def retriever_for(kind):
        if kind in (None, "bm25"):
            return search
        raise ValueError(f"no {kind} index here")

    return ServiceSettings(llm=llm if llm is not None else self_ask_llm(delay=0.2), retriever_for=retriever_for, **kw)


def open_page(driver, url: str) -> None:
    driver.get(url)
    wait(driver, lambda d: css(d, "#method option"), 20, "the methods were not loaded")


# -- Ask ----------------------------------------------------------------------------------------------------
def test_ask_streams_the_trace_with_its_steps_passages_calls_and_cost(browser):
    d = browser
    with serve(settings()) as url:
        open_page(d, url)
        names = [o.get_attribute("value") for o in css(d, "#method option")]
        assert {"self-ask", "hgot", "tor", "self-dc", "ircot"} <= set(names)
        select(d, "#method", "self-ask")
        assert "Press et al." in one(d, "#method-doc").text  # the paper, from GET /v1/methods
        assert css(d, "#options [data-option]"), "the method's options are offered"
        one(d, "#question").send_keys(QUESTION)
        one(d, "#k").send_keys("2")
        click(d, one(d, "#options-box summary"))
        assert not css(d, "#opt-preset")  # Self-Ask has no preset
        select(d, "#method", "hgot")  # HGOT's presets are offered, none chosen: the paper's defaults
        assert [o.get_attribute("value") for o in css(d, "#opt-preset option")] == ['"small-model"', "null"]
        assert one(d, "#opt-preset").get_attribute("value") == "null" and "step_answers=true" in one(d, "#options").text
        select(d, "#opt-preset", '"small-model"')
        assert one(d, "#opt-preset").get_attribute("value") == '"small-model"'  # sent as options.preset
        assert "changed" in one(d, "#opt-preset").find_element("xpath", "..").get_attribute("class")
        select(d, "#method", "self-ask")
        one(d, "#opt-max_steps").clear()
        one(d, "#opt-max_steps").send_keys("4")
        assert "changed" in one(d, "#opt-max_steps").find_element("xpath", "..").get_attribute("class")
        click(d, one(d, "#ask-submit"))
        # the live view grows before the answer comes (the scripted model takes 0.2 s a call)
        wait(d, lambda d: len(css(d, "#ask-result details.step")) >= 2
             and "running" in one(d, "#ask-result .answer-text").text, 20, "no live step while the method runs")
        assert one(d, "#ask-stop").is_enabled() and not one(d, "#ask-submit").is_enabled()
        wait(d, lambda d: "Answered" in one(d, "#ask-status").text, 30, "no answer")

        assert one(d, "#ask-error").get_attribute("hidden") is not None
        assert one(d, "#ask-result .answer-text").text == "Stanley"
        kinds = [s.get_attribute("data-kind") for s in css(d, "#ask-result details.step")]
        assert kinds[0] == "question"
        # the options sent: k and the one option changed (the method's configuration, in its trace)
        config = d.execute_script("""return Object.fromEntries([...document.querySelectorAll(
            '#ask-result details.config dl.kv-list > dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))""")
        assert config["k"] == "2" and config["max_steps"] == "4" and config["shots"] == "4"
        assert kinds.count("follow_up") >= 2 and kinds.count("intermediate_answer") == 2
        # the hops as a chain: each follow-up with its intermediate answer and passages
        hops = css(d, "#ask-result ol.chain > li")
        assert len(hops) == 2
        assert "Which county is Van Hook Township in?" in hops[0].text and "Mountrail County" in hops[0].text
        assert "What is the county seat of Mountrail County?" in hops[1].text and "Stanley" in hops[1].text
        assert css(hops[0], ".passage-link")
        # the cost: the total of the answer's usage, and per step
        llm_calls = int(one(d, "#ask-result .cost-llm .value").text.split()[0])
        assert llm_calls == len(css(d, "#ask-result .tv-steps .llm-link")) >= 5
        assert int(one(d, "#ask-result .cost-retrievals .value").text) == 2
        assert int(one(d, "#ask-result .cost-prompt .value").text.replace(",", "")) > 0
        assert any("LLM call" in m.text for m in css(d, "#ask-result .step-meta"))

        # an LLM call opens to its prompt and raw output
        call = next(b for b in css(d, "#ask-result .tv-steps .llm-link") if b.is_displayed())
        click(d, call)
        wait(d, lambda d: one(d, "#detail").get_attribute("open") is not None, 5, "the LLM call did not open")
        body = one(d, "#detail-body").text
        assert "Prompt" in body and "Raw output" in body and "Follow up" in body
        close_detail(d)

        # a passage opens to its text and score: the XSS probe is text, and never runs
        link = next(b for b in css(d, '#ask-result .passage-link[data-passage-id="b"]') if b.is_displayed())
        assert 'Stanley <img src=x onerror="window.__xss=1">' in link.text
        click(d, link)
        wait(d, lambda d: one(d, "#detail").get_attribute("open") is not None, 5, "the passage did not open")
        assert one(d, "#detail-title").text == 'Passage: Stanley <img src=x onerror="window.__xss=1">'
        shown = one(d, "#detail-body .passage-text").text
        assert shown == PASSAGES["b"].text
        assert "score" in one(d, "#detail-body").text
        assert not css(d, "#detail-body img, #detail-body script, #ask-result img, #ask-result script")
        close_detail(d)
        assert d.execute_script("return window.__xss") is None

        # Stop ends the stream: the view says so, and the form asks again
        click(d, one(d, "#ask-submit"))
        wait(d, lambda d: css(d, "#ask-result details.step"), 20, "no live step")
        click(d, one(d, "#ask-stop"))
        wait(d, lambda d: one(d, "#ask-status").text == "Stopped.", 10, "not stopped")
        assert "stopped" in one(d, "#ask-result .answer-text").text
        assert one(d, "#ask-submit").is_enabled() and not one(d, "#ask-stop").is_enabled()
        assert page_errors(d) == []


def test_ask_shows_a_refused_request_and_a_method_failure(browser):
    d = browser

    def broken(request):
        raise RuntimeError("the scripted model broke")

    with serve(settings(ScriptedLLM(replies=broken), max_k=10)) as url:
        open_page(d, url)
        select(d, "#method", "retrieve-then-read")
        one(d, "#question").send_keys(QUESTION)
        one(d, "#k").send_keys("11")
        click(d, one(d, "#ask-submit"))
        wait(d, lambda d: one(d, "#ask-error").is_displayed(), 20, "no error shown")
        error = one(d, "#ask-error").text
        assert "422" in error and "k must be between 1 and 10" in error
        # the method's own failure: an answer with its error, and the trace up to it
        one(d, "#k").clear()
        click(d, one(d, "#ask-submit"))
        wait(d, lambda d: "Answered" in one(d, "#ask-status").text, 30, "no answer")
        assert not one(d, "#ask-error").is_displayed()
        assert "the scripted model broke" in one(d, "#ask-result .tv-answer .tv-error").text
        assert any("error" in b.text for b in css(d, "#ask-result details.step .badge"))
        assert page_errors(d) == []


def test_the_api_key_is_sent_as_a_bearer_token(browser):
    d = browser
    with serve(settings(api_key="s3cret-key")) as url:
        d.get(url)
        d.execute_script("sessionStorage.clear()")
        d.get(url)
        wait(d, lambda d: one(d, "#ask-error").is_displayed(), 20, "no error without the key")
        assert "401" in one(d, "#ask-error").text and "API key" in one(d, "#ask-error").text
        click(d, one(d, "#key-box summary"))
        one(d, "#api-key").send_keys("s3cret-key")
        click(d, one(d, "#api-key-save"))
        wait(d, lambda d: css(d, "#method option"), 20, "the methods were not loaded with the key")
        assert one(d, "#api-key-status").text == "(set)"
        assert d.execute_script("return sessionStorage.getItem('hopqa.apiKey')") == "s3cret-key"
        assert d.execute_script("return document.cookie") == ""  # the key is never a cookie
        assert one(d, "#ask-error").get_attribute("hidden") is not None
        d.execute_script("sessionStorage.clear()")


# -- Runs ---------------------------------------------------------------------------------------------------
EXAMPLES = [
    Example("q1", QUESTION, ["Stanley"], "musique", "dev", list(PASSAGES.values())),
    Example("q2", "Who founded the town of Stanley?", ["Kirk"], "musique", "dev", list(PASSAGES.values())),
    Example("q3", "Please fail on this question?", ["Minot"], "musique", "dev", list(PASSAGES.values())),
    Example("q4", "Which river runs through Mountrail County?", ["Missouri"], "musique", "dev",
            list(PASSAGES.values())),
]


def _eval_llm() -> ScriptedLLM:
    """Retrieve-then-Read (its prompt shows the passages) right on q1 and q4; Direct right on q2."""

    def reply(request):
        text = request.text()
        reads = "Answer the question using the passages" in text
        if "fail on this" in text:
            raise RuntimeError("scripted failure")
        if "Van Hook" in text.split("Question:")[-1]:
            return "Stanley" if reads else "Minot"
        if "founded" in text:
            return "Nobody" if reads else "Kirk"
        return "Missouri" if reads else "Souris"

    return ScriptedLLM(replies=reply)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    """Two methods' runs of the same four questions, written by the real runner."""
    from hopqa.build import build_method

    root = tmp_path_factory.mktemp("runs")
    run = root / "bench" / "musique-dev-distractor"
    evaluate(build_method("retrieve-then-read", _eval_llm(), None), EXAMPLES, run / "retrieve-then-read",
             progress=False)
    evaluate(build_method("direct", _eval_llm()), EXAMPLES, run / "direct", progress=False)
    return root


def record_ids(driver) -> list[str]:
    """The ids of the rows of the questions table, in order (read at once)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#records tbody tr.record')].map((r) => r.dataset.id)")


def test_runs_table_sorts_filters_and_compares_two_methods_side_by_side(browser, runs_dir):
    d = browser
    with serve(settings(runs_dir=runs_dir)) as url:
        d.get(url + "#runs")
        wait(d, lambda d: len(css(d, "#runs-table tbody tr")) == 2, 20, "the runs were not listed")
        rows = {(r.get_attribute("data-run"), r.get_attribute("data-method")): r for r in css(d, "#runs-table tbody tr")}
        assert set(rows) == {("bench/musique-dev-distractor", "retrieve-then-read"),
                             ("bench/musique-dev-distractor", "direct")}
        click(d, one(rows[("bench/musique-dev-distractor", "retrieve-then-read")], ".run-open"))
        wait(d, lambda d: len(record_ids(d)) == 4, 20, "the run's questions were not listed")
        assert record_ids(d) == ["q1", "q2", "q3", "q4"]
        first = one(d, '#records tr[data-id="q1"]').text
        assert QUESTION in first and "Stanley" in first and "right" in first
        assert "failed" in one(d, '#records tr[data-id="q3"]').text

        # sort: by question, then the other way; by id descending
        click(d, one(d, '#records th button[data-key="question"]'))
        by_question = sorted(EXAMPLES, key=lambda e: e.question)
        assert record_ids(d) == [e.id for e in by_question]
        assert one(d, '#records th[data-key="question"]').get_attribute("aria-sort") == "ascending"
        click(d, one(d, '#records th button[data-key="question"]'))
        assert record_ids(d) == [e.id for e in reversed(by_question)]
        assert one(d, '#records th[data-key="question"]').get_attribute("aria-sort") == "descending"
        click(d, one(d, '#records th button[data-key="id"]'))
        assert record_ids(d) == ["q1", "q2", "q3", "q4"]

        # filter: wrong only (as the API's wrong=true: EM 0 or failed), failed only, text
        click(d, one(d, "#filter-wrong"))
        assert record_ids(d) == ["q2", "q3"]
        click(d, one(d, "#filter-wrong"))
        click(d, one(d, "#filter-failed"))
        assert record_ids(d) == ["q3"]
        click(d, one(d, "#filter-failed"))
        one(d, "#filter-text").send_keys("river")
        assert record_ids(d) == ["q4"]
        one(d, "#filter-text").clear()
        one(d, "#filter-text").send_keys(" ")  # an input event after clear()
        wait(d, lambda d: len(record_ids(d)) == 4, 5, "the text filter was not cleared")

        # method B side by side: A right and B wrong
        select(d, "#method-b", "direct")
        wait(d, lambda d: len(css(d, "#records thead th")) == 10, 20, "no column of method B")
        assert "Kirk" in one(d, '#records tr[data-id="q2"]').text
        select(d, "#filter-compare", "a-right-b-wrong")
        assert record_ids(d) == ["q1", "q4"]
        select(d, "#filter-compare", "a-wrong-b-right")
        assert record_ids(d) == ["q2"]
        select(d, "#filter-compare", "a-right-b-wrong")
        click(d, one(d, '#records tr[data-id="q1"] .record-open'))
        wait(d, lambda d: all(css(side, "details.step") for side in css(d, "#compare .side")), 20,
             "the two traces were not loaded")
        sides = css(d, "#compare .side")
        assert len(sides) == 2
        assert "retrieve-then-read" in one(sides[0], ".side-title").text
        assert "direct" in one(sides[1], ".side-title").text
        assert one(sides[0], ".answer-text").text == "Stanley"
        assert one(sides[1], ".answer-text").text == "Minot"
        assert "Stanley" in one(sides[0], ".gold").text
        assert [s.get_attribute("data-kind") for s in css(sides[0], "details.step")] == ["question", "retrieve", "read"]
        assert [s.get_attribute("data-kind") for s in css(sides[1], "details.step")][:1] == ["question"]
        # the trace of a run opens the same way: an LLM call, a passage (text as text)
        click(d, next(b for b in css(sides[0], ".llm-link") if b.is_displayed()))
        wait(d, lambda d: one(d, "#detail").get_attribute("open") is not None, 5, "the LLM call did not open")
        assert "Answer the question using the passages" in one(d, "#detail-body .prompt").text
        close_detail(d)
        click(d, next(b for b in css(sides[0], '.passage-link[data-passage-id="b"]') if b.is_displayed()))
        wait(d, lambda d: one(d, "#detail").get_attribute("open") is not None, 5, "the passage did not open")
        close_detail(d)
        assert d.execute_script("return window.__xss") is None
        assert page_errors(d) == []


@pytest.fixture(scope="module")
def views_dir(tmp_path_factory) -> Path:
    """Real HGOT, Tree of Reviews and Self-DC traces (the scripted worlds of their own tests),
    written by the real runner in the open setting (each method searches its own retriever)."""
    from tests import test_hgot, test_self_dc, test_tor

    root = tmp_path_factory.mktemp("views")
    run = root / "views"
    hgot, _ = test_hgot.scripted_hgot()
    evaluate(hgot, [Example("h1", test_hgot.Q, ["Stanley"], "musique", "dev")], run / "hgot", setting="open",
             progress=False)
    tor = test_tor.tor(ScriptedLLM(replies=test_tor.world_reply))
    evaluate(tor, [Example("t1", test_tor.Q, ["Ada Lovelace"], "musique", "dev")], run / "tor", setting="open",
             progress=False)
    self_dc, _ = test_self_dc.scripted({test_self_dc.Q: "40", "Which county is Van Hook Township in?": "10",
                                        "What is the seat of Mountrail County?": "90"})
    evaluate(self_dc, [Example("s1", test_self_dc.Q, ["Stanley"], "musique", "dev")], run / "self-dc",
             setting="open", progress=False)
    return root


def open_trace(driver, method: str, qid: str):
    """Runs view: method ``method`` of the run ``views``, the trace of ``qid``; its reasoning view."""
    select(driver, "#method-a", method)
    wait(driver, lambda d: record_ids(d) == [qid], 20, f"the run of {method} was not listed")
    click(driver, one(driver, f'#records tr[data-id="{qid}"] .record-open'))
    wait(driver, lambda d: css(d, "#compare .side details.step"), 20, f"the trace of {method} was not loaded")
    return one(driver, "#compare .side .tv-reasoning")


def test_each_methods_own_view_of_its_trace(browser, views_dir):
    d = browser
    with serve(settings(runs_dir=views_dir)) as url:
        d.get(url + "#runs")
        wait(d, lambda d: len(css(d, "#runs-table tbody tr")) == 3, 20, "the runs were not listed")
        click(d, one(d, "#runs-table tbody tr .run-open"))

        # HGOT: the plan as a graph (two steps, step 2 depends on step 1), each step's answer and confidence
        view = open_trace(d, "hgot", "h1")
        assert "HGOT" in view.text
        top = one(view, ".hgot-traverse")
        assert css(top, "svg.dag")
        nodes = css(top, "svg.dag .dag-node")
        assert len(nodes) == 2 and len(css(top, "svg.dag path.edge")) == 1
        steps = css(top, ":scope > .hgot-plan > ol.plan-steps > li.plan-step")
        assert [s.get_attribute("data-step-index") for s in steps] == ["1", "2"]
        assert "Which county is Van Hook Township in?" in steps[0].text and "Mountrail County" in steps[0].text
        assert "depends on step 1" in steps[1].text and "rewritten" in steps[1].text and "Stanley" in steps[1].text
        assert css(steps[0], "meter") and css(steps[1], "meter")
        text = top.get_attribute("textContent")
        assert "STOP" in text and "infer" in text and "probe" in text

        # Tree of Reviews: every node's action, why, and the paragraphs pruned
        view = open_trace(d, "tor", "t1")
        assert "Tree of Reviews" in view.text
        actions = [n.get_attribute("data-action") for n in css(view, "li.tor-node")]
        assert set(actions) >= {"accept", "reject", "search"}
        rejected = next(n for n in css(view, "li.tor-node") if n.get_attribute("data-action") == "reject")
        assert "pruned" in one(rejected, ".why").text
        searched = next(n for n in css(view, "li.tor-node") if n.get_attribute("data-action") == "search")
        assert "query:" in searched.text and css(searched, ".tor-search")
        assert css(searched, "li.tor-node")  # its children, nested under it
        assert "Evidence pool" in view.text

        # Self-DC: the recursion with each question's confidence and route
        view = open_trace(d, "self-dc", "s1")
        assert "Self-DC" in view.text
        routes = [n.get_attribute("class") for n in css(view, "li.sdc-node")]
        assert len(routes) == 3
        assert "route-decompose" in routes[0]
        assert {"route-retrieve-then-read", "route-generate-then-read"} <= {r.split()[-1] for r in routes[1:]}
        top = one(view, "li.sdc-node")
        assert css(top, "meter") and "decompose" in top.text and css(top, "ul.sdc-tree li.sdc-node")
        assert "combined" in top.get_attribute("textContent")
        assert page_errors(d) == []


# -- real traces of the embedded Qwen: the docs' pictures -------------------------------------------------------
QWEN_RUNS = Path(__file__).resolve().parent / "fixtures" / "qwen_runs.json.gz"


@pytest.fixture(scope="module")
def qwen_runs_dir(tmp_path_factory) -> tuple[Path, dict]:
    """A runs directory of stored ``hopqa eval`` records of the embedded Qwen (``QWEN_RUNS``:
    Retrieve-then-Read and IRCoT on five MuSiQue questions, HGOT and Tree of Reviews on one),
    served as the service serves any run: no model is loaded."""
    import gzip
    import json

    from hopqa.evaluation.runner import summarize

    data = json.loads(gzip.decompress(QWEN_RUNS.read_bytes()))
    root = tmp_path_factory.mktemp("qwen-runs")
    for method, run in data["methods"].items():
        out = root / data["run"] / method
        out.mkdir(parents=True)
        (out / "config.json").write_text(json.dumps(run["config"]), encoding="utf-8")
        (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run["records"]), encoding="utf-8")
        summary = summarize(run["records"], out)
        (out / "summary.json").write_text(json.dumps(summary.to_dict()), encoding="utf-8")
    return root, data


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a picture goes: ``HOPQA_SCREENSHOTS`` (``make screenshots``: ``docs``), else ``tmp_path``."""
    folder = Path(os.environ.get("HOPQA_SCREENSHOTS") or tmp_path)
    path = (folder if folder.is_absolute() else REPO / folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def take(driver, path: Path) -> None:
    driver.execute_script("window.scrollTo(0, 0)")
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000


def test_real_qwen_traces_in_the_page_and_their_pictures(browser, qwen_runs_dir, tmp_path):
    """Stored traces of the embedded Qwen, shown as a user sees them: two methods side by side in
    the Runs view, HGOT's plan graph, a Tree of Reviews tree; each shows the stored answer. The
    pictures go to a temporary folder (``make screenshots``: into docs/)."""
    d = browser
    root, data = qwen_runs_dir
    stored = {m: {r["id"]: r for r in run["records"]} for m, run in data["methods"].items()}
    q = "2hop__335418_279684"  # the demo's question: What team was Anna Benson's husband on?
    with serve(settings(runs_dir=root)) as url:
        d.set_window_size(1280, 1000)
        d.get(url + "#runs")
        wait(d, lambda d: len(css(d, "#runs-table tbody tr")) == 4, 20, "the runs were not listed")
        click(d, one(d, '#runs-table tbody tr[data-method="retrieve-then-read"] .run-open'))
        wait(d, lambda d: len(record_ids(d)) == 5, 20, "the run's questions were not listed")
        select(d, "#method-b", "ircot")
        wait(d, lambda d: len(css(d, "#records thead th")) == 10, 20, "no column of method B")
        click(d, one(d, f'#records tr[data-id="{q}"] .record-open'))
        wait(d, lambda d: all(css(side, "details.step") for side in css(d, "#compare .side")), 20,
             "the two traces were not loaded")
        sides = css(d, "#compare .side")
        assert one(sides[0], ".answer-text").text == stored["retrieve-then-read"][q]["prediction"]
        assert one(sides[1], ".answer-text").text == stored["ircot"][q]["prediction"] == "Pittsburgh Pirates"
        take(d, screenshot_path(tmp_path, "runs-compare.png"))

        d.set_window_size(1280, 1400)
        select(d, "#method-b", "")  # one method at a time: its own view of the trace
        view = open_trace(d, "hgot", q)
        assert one(d, "#compare .side .answer-text").text == stored["hgot"][q]["prediction"]
        assert css(view, "svg.dag .dag-node")
        d.execute_script("arguments[0].scrollIntoView()", one(view, ".hgot-traverse"))
        assert d.save_screenshot(str(screenshot_path(tmp_path, "hgot-plan.png")))

        view = open_trace(d, "tor", q)
        assert one(d, "#compare .side .answer-text").text == stored["tor"][q]["prediction"]
        assert css(view, "li.tor-node")
        d.execute_script("arguments[0].scrollIntoView()", view)
        assert d.save_screenshot(str(screenshot_path(tmp_path, "tor-tree.png")))
        assert page_errors(d) == []


# -- the real model: a live answer -----------------------------------------------------------------------------
@pytest.mark.slow
def test_a_real_answer_in_the_page_and_its_screenshot(browser, smollm2, demo_index, hopqa_home, tmp_path):
    d = browser
    screenshot = tmp_path / "server-page.png"

    def retriever_for(kind):
        if kind in (None, "bm25"):
            return demo_index
        raise ValueError(f"no {kind} index in this test")

    question = "What team was Anna Benson's husband on?"
    with serve(ServiceSettings(llm=smollm2, retriever_for=retriever_for, home=hopqa_home, timeout=600)) as url:
        d.set_window_size(1280, 1500)
        open_page(d, url)
        select(d, "#method", "self-ask")
        one(d, "#question").send_keys(question)
        click(d, one(d, "#ask-submit"))
        wait(d, lambda d: css(d, "#ask-result details.step"), 120, "no live step")
        wait(d, lambda d: "Answered" in one(d, "#ask-status").text or one(d, "#ask-error").is_displayed(), 600,
             "no answer")
        assert not one(d, "#ask-error").is_displayed(), one(d, "#ask-error").text
        assert css(d, "#ask-result .tv-steps .llm-link")
        assert int(one(d, "#ask-result .cost-llm .value").text.split()[0]) >= 1
        d.execute_script("window.scrollTo(0, 0)")
        assert d.save_screenshot(str(screenshot))
        assert screenshot.stat().st_size > 10_000
        assert page_errors(d) == []
