"""Self-DC's α and β by its paper's two-stage search (``hopqa.evaluation.calibrate``, ``hopqa
calibrate``; issue 33): the search's choices, the command over stand-in runs, and the command on
the embedded model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hopqa import cli
from hopqa.evaluation.calibrate import PAPER_ALPHAS, PAPER_BETAS, two_stage
from tests.test_eval_cli import SMOL, hopqa


def test_two_stage_searches_alpha_at_beta_0_1_then_beta_at_the_best_alpha():
    calls = []

    def score(alpha, beta):
        calls.append((alpha, beta))
        return -abs(alpha - 0.7) - abs(beta - 0.3), {}

    result = two_stage(score)
    assert (result.alpha, result.beta) == (0.7, 0.3)
    # 9 alphas at 0.1, then the 4 other betas at 0.7: (0.7, 0.1) is scored once
    assert calls == [(a, 0.1) for a in PAPER_ALPHAS] + [(0.7, b) for b in PAPER_BETAS if b != 0.1]
    assert [p.stage for p in result.points] == [1] * 9 + [2] * 4
    assert result.score == pytest.approx(0.0)


def test_ties_keep_the_earlier_point_and_a_grid_must_not_be_empty():
    flat = two_stage(lambda a, b: (0.5, {"n": 3}))
    assert (flat.alpha, flat.beta) == (0.1, 0.1) and flat.points[0].details == {"n": 3}
    # a beta grid without 0.1: the second stage compares only its own points
    only = two_stage(lambda a, b: (b, {}), alphas=[0.4], betas=[0.3, 0.2])
    assert (only.alpha, only.beta, len(only.points)) == (0.4, 0.3, 3)
    with pytest.raises(ValueError):
        two_stage(lambda a, b: (0.0, {}), alphas=[])


def _fake_eval(args) -> int:
    """``hopqa eval`` standing in: one run directory per point, F1 highest at α 0.4, β 0.2, and
    the route of each question's root node in its trace."""
    values = dict(item.split("=") for item in args.set)
    alpha, beta = float(values["alpha"]), float(values["beta"])
    run = Path(args.out) / f"{args.dataset}-{args.split}-{args.setting}" / args.method
    run.mkdir(parents=True, exist_ok=True)
    f1 = 0.5 - abs(alpha - 0.4) - abs(beta - 0.2)
    (run / "summary.json").write_text(json.dumps({"n": 2, "failed": 0, "metrics": {"f1": f1, "em": 0.0}}))
    routes = ["decompose", "retrieve-then-read"]
    (run / "results.jsonl").write_text("".join(
        json.dumps({"trace": {"children": [{"kind": "self-dc", "outputs": {"route": r}}]}}) + "\n" for r in routes))
    print("| a run's own table |")
    return 0


def test_calibrate_command_prints_the_grid_and_writes_the_choice(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "cmd_eval", _fake_eval)
    out = tmp_path / "cal"
    code = cli.main(["calibrate", "--dataset", "musique", "--alphas", "0.2,0.4,0.6", "--betas", "0.1,0.2",
                     "--set", "k=5", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr()
    assert "| a run's own table |" not in printed.out and "| a run's own table |" in printed.err
    assert "| 1 | 0.4 | 0.1 | 2 | 0.400 | 1 / 1 / 0 |" in printed.out
    assert "| 2 | 0.4 | 0.2 | 2 | 0.500 | 1 / 1 / 0 |" in printed.out
    assert "--set alpha=0.4 --set beta=0.2" in printed.out
    record = json.loads((out / "calibration.json").read_text())
    assert (record["alpha"], record["beta"], record["metric"], record["split"]) == (0.4, 0.2, "f1", "train")
    assert record["set"] == ["k=5"] and len(record["points"]) == 4
    assert (out / "alpha=0.4,beta=0.2" / "musique-train-distractor" / "self-dc" / "summary.json").is_file()


@pytest.mark.parametrize("argv, message", [
    (["--set", "alpha=0.3"], "calibrate chooses alpha and beta"),
    (["--set", "self-dc.beta=0.3"], "calibrate chooses alpha and beta"),
    (["--metric", "acc"], "--judge"),
    (["--alphas", "0.2,1.5"], "outside 0-1"),
    (["--betas", "x"], "not a number"),
])
def test_calibrate_refuses_what_it_cannot_search(argv, message, monkeypatch, capsys, tmp_path):
    """A usage error (exit code 2, one line) before any run: the grids' values are checked as the
    arguments are read, the rest before the first point."""
    monkeypatch.delenv("HOPQA_JUDGE", raising=False)
    monkeypatch.setattr(cli, "cmd_eval", _fake_eval)
    try:
        code = cli.main(["calibrate", "--dataset", "musique", "--out", str(tmp_path), *argv])
    except SystemExit as exc:  # argparse's own error
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_calibrate_on_the_embedded_model_and_resumed(tmp_path, data_dir):
    """``hopqa calibrate`` on SmolLM2 and one MuSiQue train question, a 2 × 2 grid (3 points): each
    point a Self-DC run with its α and β in its config; run again, it answers nothing anew (every
    point's record is on disk) and chooses the same."""
    home, out = tmp_path / "home", tmp_path / "cal"
    args = ["calibrate", "--dataset", "musique", "--limit", "1", "--alphas", "0.3,0.9", "--betas", "0.1,0.3",
            "--llm", SMOL, "--no-progress", "--data-dir", str(data_dir), "--set", "document_tokens=32",
            "--out", str(out)]
    r = hopqa(*args, home=home)
    assert r.returncode == 0, r.stderr
    first = json.loads((out / "calibration.json").read_text())
    assert len(first["points"]) == 3 and first["alpha"] in (0.3, 0.9) and first["beta"] in (0.1, 0.3)
    for p in first["points"]:
        run = Path(p["details"]["run"])
        config = json.loads((run / "config.json").read_text())
        assert (config["options"]["alpha"], config["options"]["beta"]) == (p["alpha"], p["beta"])
        assert p["details"]["n"] == 1 and sum(p["details"]["routes"].values()) == 1
    assert f"chosen: alpha={first['alpha']:g} beta={first['beta']:g}" in r.stdout
    again = hopqa(*args, home=home)
    assert again.returncode == 0, again.stderr
    second = json.loads((out / "calibration.json").read_text())
    assert [p["score"] for p in second["points"]] == [p["score"] for p in first["points"]]
    assert (second["alpha"], second["beta"]) == (first["alpha"], first["beta"])
