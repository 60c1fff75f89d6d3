"""Reliability drills: the ``hopqa`` command (a subprocess) against a fake OpenAI-compatible
server that fails on purpose (``tests/fault_server.py``). No model is loaded.

- a 200-question evaluation through 20 % mixed faults finishes and records every question;
  ``--retry-failed`` against the healed server completes them;
- ``kill -9`` at three seeded moments, resumed each time, ends equal to an uninterrupted run;
- ``hopqa ask`` returns promptly with a clear error (or an answer) on every single fault kind;
- a URL password never reaches a file hopqa writes (run directory, cache) or its output.

Every loop is bounded and every subprocess has a timeout.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.register_assert_rewrite("fault_server")  # also loaded as a plugin below
from fault_server import MIXED, wait_until  # noqa: E402

#: The fault_server fixture (a factory of FaultServer).
pytest_plugins = ["fault_server"]

#: Most seconds a drill's subprocess may take before it counts as hung.
SUBPROCESS_TIMEOUT = 300
#: What the error of a failed call says, per fault kind (after "openai:fake@URL: ").
CAUSES = {
    "http500": "HTTP 500 after",
    "http429": "HTTP 429 (rate limited) after",
    "hang": "no reply within 2 s after",
    "malformed_json": "malformed JSON response after",
    "empty_choices": "empty choices after",
    "garbage": "a response that is not JSON after",
}


def hopqa(args: list[str], timeout: float = SUBPROCESS_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``hopqa ARGS`` in a fresh process with no hopqa or OpenAI settings from the
    environment (every test passes --home)."""
    return subprocess.run([sys.executable, "-m", "hopqa.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=_clean_env(), check=False)


def _clean_env() -> dict[str, str]:
    drop = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HOPQA_HOME", "HOPQA_LLM", "HOPQA_JUDGE", "HOPQA_DATA_DIR")
    return {k: v for k, v in os.environ.items() if k not in drop}


def write_questions(path: Path, n: int) -> Path:
    """A generic question file (README "Datasets"): question ``i`` ends in its answer ``w<i>``,
    which is what the fake server answers."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"q{i:03d}", "question": f"Which word ends question {i}: w{i}",
                                "answers": [f"w{i}"]}) + "\n")
    return path


def result_lines(path: Path) -> list[dict]:
    """Every line of a results.jsonl (all must be whole JSON objects)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def eval_args(questions: Path, out: Path, home: Path, spec: str, workers: int) -> list[str]:
    return ["eval", "--dataset", str(questions), "--method", "direct", "--setting", "open",
            "--workers", str(workers), "--no-progress", "--out", str(out), "--home", str(home), "--llm", spec]


def run_dir(out: Path, questions: Path) -> Path:
    return out / f"{questions.name.split('.')[0]}-file-open" / "direct"


# -- a: mixed faults, then --retry-failed ---------------------------------------------------
@pytest.mark.slow
def test_eval_through_mixed_faults_then_retry_failed(fault_server, tmp_path):
    s = fault_server(faults={k: 0.2 / len(MIXED) for k in MIXED}, seed=13, hang_seconds=3.0)
    questions = write_questions(tmp_path / "drill.jsonl", 200)
    ids = {f"q{i:03d}" for i in range(200)}
    spec = f"openai:fake@{s.url}?retries=1&timeout=2&backoff=0.05"
    args = eval_args(questions, tmp_path / "runs", tmp_path / "home", spec, workers=8)
    t0 = time.monotonic()
    first = hopqa(args)
    took = time.monotonic() - t0
    assert first.returncode == 0, first.stderr[-2000:]
    results = run_dir(tmp_path / "runs", questions) / "results.jsonl"
    lines = result_lines(results)
    assert {r["id"] for r in lines} == ids and len(lines) == 200  # none missing, none twice
    assert all(r["status"] in ("ok", "failed") for r in lines)
    failed = [r for r in lines if r["status"] == "failed"]
    # Faults are drawn per (seed, prompt, attempt): with seed 13 some questions fail both attempts.
    assert 0 < len(failed) < 40, (len(failed), s.served)
    assert all(s.served[k] > 0 for k in MIXED), s.served
    for r in failed:
        prefix = f"LLMError: openai:fake@{s.url}: "
        assert r["error"].startswith(prefix) and any(c in r["error"] for c in CAUSES.values()), r["error"]
    ok_healthy = [r for r in lines if r["status"] == "ok" and r["prediction"] == r["gold"][0]]
    assert len(ok_healthy) > 150
    print(f"first run: {took:.1f} s, {len(failed)} failed, served {dict(s.served)}")

    s.set_faults({})  # the server heals
    second = hopqa(args + ["--retry-failed"])
    assert second.returncode == 0, second.stderr[-2000:]
    final = result_lines(results)
    latest = {r["id"]: r for r in final}
    assert set(latest) == ids and all(r["status"] == "ok" for r in latest.values())
    assert all(latest[r["id"]]["prediction"] == r["gold"][0] for r in failed)
    # One line per id once a run completes (the runner compacts results.jsonl).
    assert len(final) == 200, f"{len(final)} lines for 200 ids: results.jsonl was not compacted"


# -- b: kill -9 and resume -------------------------------------------------------------------
@pytest.mark.slow
def test_kill_9_three_times_then_resume_equals_a_clean_run(fault_server, tmp_path):
    s = fault_server(delay=0.1)
    questions = write_questions(tmp_path / "kill.jsonl", 80)
    spec = f"openai:fake@{s.url}?retries=1&timeout=10"
    killed_out, clean_out = tmp_path / "killed", tmp_path / "clean"
    args = eval_args(questions, killed_out, tmp_path / "home-killed", spec, workers=2)
    results = run_dir(killed_out, questions) / "results.jsonl"
    rng = random.Random(2024)
    kills = 0
    for _ in range(3):
        before = results.stat().st_size if results.exists() else 0
        proc = subprocess.Popen([sys.executable, "-m", "hopqa.cli", *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=_clean_env())
        try:
            # a random moment once this attempt is answering (so every attempt makes progress)
            wait_until(lambda p=proc, b=before: (results.exists() and results.stat().st_size > b) or p.poll() is not None,
                       timeout=60)
            time.sleep(rng.uniform(0.0, 1.5))
            if proc.poll() is None:
                proc.kill()  # SIGKILL
                kills += 1
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:  # pragma: no cover  (only if wait timed out)
                proc.kill()
                proc.wait(timeout=30)
    assert kills >= 2, "the run finished before it could be killed: raise the server delay"
    partial = len(result_lines(results)) if results.exists() else 0
    assert partial < 80
    resumed = hopqa(args)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    clean = hopqa(eval_args(questions, clean_out, tmp_path / "home-clean", spec, workers=2))
    assert clean.returncode == 0, clean.stderr[-2000:]

    def outcome(path: Path) -> dict[str, tuple[str, str]]:
        lines = result_lines(path)
        assert len(lines) == len({r["id"] for r in lines}), "an id was recorded twice"
        return {r["id"]: (r["prediction"], r["status"]) for r in lines}

    got = outcome(results)
    want = outcome(run_dir(clean_out, questions) / "results.jsonl")
    assert got == want and len(want) == 80
    assert all(status == "ok" for _, status in want.values())
    print(f"killed {kills} times with {partial} of 80 recorded before the last resume")


# -- c: hopqa ask on every single fault -------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kind", MIXED)
def test_ask_returns_promptly_on_every_fault(fault_server, tmp_path, kind):
    s = fault_server(faults={kind: 1.0}, hang_seconds=3.0)
    spec = f"openai:fake@{s.url}?retries=1&timeout=2&backoff=0.05"
    t0 = time.monotonic()
    p = hopqa(["ask", "--method", "direct", "--llm", spec, "--home", str(tmp_path / "home"), "--json",
               "Which word ends this question: zebra"], timeout=60)
    took = time.monotonic() - t0
    assert took < 30, f"hopqa ask took {took:.1f} s on {kind}"
    answer = json.loads(p.stdout)
    if kind in CAUSES:  # the call failed for good: exit 1, the error names the server and the cause
        assert p.returncode == 1, p.stderr
        assert answer["error"].startswith(f"LLMError: openai:fake@{s.url}: {CAUSES[kind]} 2 attempts"), answer["error"]
        assert len(s.requests) == 2
        calls = [c for st in _walk(answer["trace"]) for c in st["llm_calls"]]
        assert calls and calls[-1]["error"] == answer["error"]
    else:  # the server answered, badly: an answer (cut to the reply cap if long), exit 0
        assert p.returncode == 0, p.stderr
        assert not answer.get("error")
        assert len(s.requests) == 1
        raw = answer["trace"]["children"][0]["outputs"]["raw"]
        assert len(raw) <= 2000
        if kind == "long":
            assert raw.startswith("zebra lorem") and len(raw) == 2000
            events = [e["message"] for st in _walk(answer["trace"]) for e in st["events"]]
            assert "LLM reply truncated" in events


def _walk(step: dict):
    yield step
    for child in step.get("children") or []:
        yield from _walk(child)


# -- credentials -----------------------------------------------------------------------------
@pytest.mark.slow
def test_url_password_never_reaches_a_file_or_the_output(fault_server, tmp_path):
    s = fault_server(faults={k: 0.4 / len(MIXED) for k in MIXED}, seed=5, hang_seconds=2.0)
    questions = write_questions(tmp_path / "cred.jsonl", 40)
    url = s.url.replace("http://", "http://user:secret@")
    spec = f"openai:fake@{url}?retries=0&timeout=1&backoff=0"
    home, out = tmp_path / "home", tmp_path / "runs"
    ev = hopqa(eval_args(questions, out, home, spec, workers=4))
    assert ev.returncode == 0, ev.stderr[-2000:]
    lines = result_lines(run_dir(out, questions) / "results.jsonl")
    assert any(r["status"] == "failed" for r in lines)  # error messages and tracebacks were recorded
    assert any(r["status"] == "ok" for r in lines)  # and replies were cached
    s.set_faults({"http500": 1.0})
    ask = hopqa(["ask", "--method", "direct", "--llm", spec, "--home", str(home), "--json", "--no-cache",
                 "Which word ends this question: zebra"], timeout=60)
    assert ask.returncode == 1
    s.set_faults({})
    bad = hopqa(["ask", "--method", "direct", "--llm", spec + "&retires=1", "--home", str(home), "q"], timeout=60)
    assert bad.returncode != 0
    assert s.requests and all(r["auth"].startswith("Basic ") for r in s.requests)  # the password was used
    texts = {"eval stdout": ev.stdout, "eval stderr": ev.stderr, "ask stdout": ask.stdout,
             "ask stderr": ask.stderr, "bad-spec stderr": bad.stderr}
    leaks = [name for name, text in texts.items() if "secret" in text]
    files = [p for root in (out, home) for p in root.rglob("*") if p.is_file()]
    assert any("cache" in str(p) for p in files) and len(files) > 3
    leaks += [str(p) for p in files if b"secret" in p.read_bytes()]
    assert not leaks, f"the URL password appears in: {leaks}"
