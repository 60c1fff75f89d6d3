"""Self-DC's α and β chosen as its paper chose them, on the user's own model and questions (issue 33).

Self-DC routes a question by its confidence c: [0, α−β] retrieve, (α−β, α+β) decompose,
[α+β, 1] generate. The paper's defaults (α = 0.4 verbal, 0.6 token probability; β = 0.1) were
selected for gpt-3.5-turbo-1106 by a two-stage search on accuracy (Section 6.1, Figures 4 and
5): β fixed at 0.1 while α runs over 0.1, 0.2, ..., 0.9, then α fixed at the best while β runs
over 0.1, ..., 0.5. A small model's confidences sit on another scale (Qwen2.5-1.5B's verbal
confidence is 0.8–1.0 for every question), so values chosen for GPT-3.5 route its questions
arbitrarily. ``two_stage`` runs the paper's search with any scoring function; ``hopqa
calibrate`` scores each point by a resumable evaluation on training questions (the response
cache answers the calls points share) and prints the (α, β) to pass with ``--set``.

Ties keep the earlier point of a stage (the smaller α, the smaller β). A point is scored once
even when both stages reach it ((best α, 0.1) is stage 1's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: Section 6.1's grids: α from 0.1 to 0.9 at β = 0.1, then β from 0.1 to 0.5 at the best α.
PAPER_ALPHAS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
PAPER_BETAS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)
FIRST_BETA = 0.1


@dataclass
class Point:
    """One (α, β) scored: its stage (1: α searched, 2: β searched), the score (the mean metric
    over the questions) and anything else the scorer reports (``n``, the routes taken)."""

    alpha: float
    beta: float
    stage: int
    score: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Calibration:
    """The chosen (α, β), its score, and every point scored, in the order scored."""

    alpha: float
    beta: float
    score: float
    points: list[Point]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def two_stage(
    score: Callable[[float, float], tuple[float, dict[str, Any]]],
    alphas: Sequence[float] = PAPER_ALPHAS,
    betas: Sequence[float] = PAPER_BETAS,
    first_beta: float = FIRST_BETA,
) -> Calibration:
    """The paper's two-stage selection (module docstring). ``score(alpha, beta)`` returns (the
    score, details); it is called once per distinct point. Raises ``ValueError`` for an empty
    grid."""
    if not alphas or not betas:
        raise ValueError("the α and β grids must each hold at least one value")
    points: dict[tuple[float, float], Point] = {}

    def scored(alpha: float, beta: float, stage: int) -> Point:
        key = (round(alpha, 10), round(beta, 10))
        if key not in points:
            value, details = score(alpha, beta)
            points[key] = Point(alpha, beta, stage, value, details)
        return points[key]

    best = _best([scored(a, first_beta, 1) for a in alphas])
    best = _best([scored(best.alpha, b, 2) for b in betas])  # (best α, first_beta): stage 1's point
    return Calibration(best.alpha, best.beta, best.score, list(points.values()))


def _best(points: list[Point]) -> Point:
    """The point of highest score, the earliest of equals."""
    top = points[0]
    for p in points[1:]:
        if p.score > top.score:
            top = p
    return top


def markdown_table(points: Sequence[dict[str, Any]], metric: str) -> str:
    """The points of a calibration (``Calibration.as_dict()["points"]``, or ``calibration.json``'s)
    as a Markdown table: stage, α, β, questions, the metric and how many questions each route
    took at the root, as run (a question Self-DC's ``known_route=retrieve`` sent to retrieval
    counts as retrieved)."""
    lines = [f"| stage | alpha | beta | n | {metric} | retrieve / decompose / generate |", "|---|---|---|---|---|---|"]
    for p in points:
        d = p.get("details", {})
        r = d.get("routes", {})
        lines.append(f"| {p['stage']} | {p['alpha']:g} | {p['beta']:g} | {d.get('n', '–')} | {p['score']:.3f} | "
                     f"{r.get('retrieve-then-read', 0)} / {r.get('decompose', 0)} / {r.get('generate-then-read', 0)} |")
    return "\n".join(lines) + "\n"
