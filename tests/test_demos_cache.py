"""The few-shot demonstrations are parsed once per process, even when eight evaluation workers
ask for them at the same moment (issue 14: each of them used to parse the train files)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from hopqa.datasets import demos


@pytest.fixture
def fresh_demos(monkeypatch):
    """Forget the demonstrations built so far in this process (restored afterwards)."""
    monkeypatch.setattr(demos, "_DEMOS", None)


def test_eight_concurrent_first_calls_parse_the_train_files_once(monkeypatch, fresh_demos):
    parsed: list[tuple[str, str]] = []
    real_load = demos.load_shipped

    def counting_load(name, split, *args, **kwargs):
        parsed.append((name, split))
        return real_load(name, split, *args, **kwargs)

    monkeypatch.setattr(demos, "load_shipped", counting_load)
    start = threading.Barrier(8)

    def first_call(n: int) -> list[demos.Demo]:
        start.wait(timeout=10)  # all eight ask at once
        return demos.few_shot_demos(n)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(first_call, [4] * 8))
    assert sorted(parsed) == [("2wikimultihopqa", "train"), ("musique", "train")]
    assert all(r == results[0] and len(r) == 4 for r in results)
    demos.few_shot_demos(6)  # later calls use the built demonstrations
    assert len(parsed) == 2


def test_a_failed_build_is_retried_by_the_next_call(monkeypatch, fresh_demos):
    """An error is not cached: the next call builds again (and succeeds once the files are back)."""
    real_build = demos._build_demos
    attempts = []

    def flaky_build():
        attempts.append(1)
        if len(attempts) == 1:
            raise demos.DemosUnavailableError("the shipped train subsets cannot be read (test)")
        return real_build()

    monkeypatch.setattr(demos, "_build_demos", flaky_build)
    with pytest.raises(demos.DemosUnavailableError):
        demos.few_shot_demos(2)
    assert len(demos.few_shot_demos(2)) == 2 and len(attempts) == 2
