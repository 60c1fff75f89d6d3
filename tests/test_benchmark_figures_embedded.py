"""The embedded model's benchmarks write their figures as JSON with where they came from
(``benchmarks/figures.py``), for ``benchmarks/doc_tables.py`` to render docs/llm-backends.md's
tables from: ``decode_batch.py`` and ``batched_samples.py`` on SmolLM2, a few tokens each."""

from __future__ import annotations

import json

import pytest
from test_benchmark_figures import _run


@pytest.mark.slow
def test_decode_batch_writes_a_row_per_size(tmp_path):
    done = _run("decode_batch.py", "--llm", "smollm2-135m", "--sizes", "1,2", "--prompt-tokens", "32", "--steps", "2",
                "--repeats", "1", "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["about"]["command"].startswith("benchmarks/decode_batch.py --llm smollm2-135m")
    assert figures["about"]["model"] == "embedded:smollm2-135m" and figures["about"]["prompt_tokens"] == 32
    assert [r["sequences"] for r in figures["rows"]] == [1, 2] and all(r["ms_step"] > 0 for r in figures["rows"])
    assert "| 2 | " in done.stdout  # the docs' table, printed


@pytest.mark.slow
def test_batched_samples_writes_a_row_per_n(tmp_path):
    done = _run("batched_samples.py", "--model", "smollm2-135m", "--n", "2", "--prompts", "1", "--max-tokens", "4",
                "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["about"]["model"] == "embedded:smollm2-135m" and figures["about"]["prompts"] == 1
    (row,) = figures["rows"]
    assert (row["n"], row["requests"], row["samples"]) == (2, 1, 2) and row["batched_s"] > 0 and row["alone_s"] > 0
    assert 0 <= row["identical"] <= row["same_first_token"] <= 2 and row["batched_evaluated"] > 0


@pytest.mark.slow
def test_prefix_cache_memory_writes_a_row_as_it_goes(tmp_path):
    """A budget a few snapshots of SmolLM2 fill: the run stops after the first eviction, its last
    row in the figures as printed, with the memory beside it; a budget no snapshot fits ends
    with an error, not an endless loop."""
    done = _run("prefix_cache_memory.py", "--llm", "smollm2-135m", "--budget-mb", "24", "--prompt-tokens", "600",
                "--past-full", "1", "--figures", str(tmp_path / "f.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["about"]["model"] == "embedded:smollm2-135m" and figures["about"]["budget_mb"] == 24
    assert figures["about"]["loaded_rss_mb"] > 0
    last = figures["rows"][-1]
    assert last["evictions"] >= 1 and 0 < last["cache_mb"] <= 24 and last["entries"] >= 1
    assert last["peak_rss_mb"] >= last["rss_mb"] > 0 and last["tokens_sent"] > 600
    assert f"| {last['prompts']} | {last['tokens_sent']} | " in done.stdout
    tiny = _run("prefix_cache_memory.py", "--llm", "smollm2-135m", "--budget-mb", "1", "--prompt-tokens", "600",
                cwd=tmp_path)
    assert tiny.returncode == 1 and "larger than the 1 MiB budget" in tiny.stderr
