"""HGOT's thought quality and retrieval quality (Fang et al. 2024, Eqs. 1-8), as pure functions.

A *thought* is one sampled rationale, split into statements that end in citation markers
``[i]``, plus its answer.

- Citation recall / precision (ALCE, Gao et al. 2023): a statement's recall is 1 when the
  concatenation of the passages it cites entails it. A citation of a recalled statement is
  imprecise when it is irrelevant: it alone does not entail the statement *and* the other
  citations still do. REC(τ) averages recall over statements, PREC(τ) precision over
  citations (0 for a thought with no statement / no citation).
- Eq. 1: ρ_i = α + β·REC(τ_i) + γ·PREC(τ_i).
- Eq. 2: â* = argmax over distinct normalised answers of Σ_i ρ_i·[a_i = â].
- Eq. 3: CI = Σ_i ρ_i·[a_i = â*] / Σ_i ρ_i.
- Eqs. 4-6: δ̂(p, s_j) = 1 if s_j cites p or p entails s_j; ν(p, τ_i) = ρ_i·Σ_j δ̂(p, s_j);
  ν̂(p) = Σ_i ν(p, τ_i); ν̄(p) = ν̂(p) / max_k ν̂(p_k) (0 when all are 0).
- Eqs. 7-8: σ(p, 0) = retriever score normalised to [0, 1] (divided by the largest score of
  its retrieval); σ(p, t+1) = w1·σ(p, t) + w2·ν̄(p) + w3·CI.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hopqa.text import normalize_answer

Entails = Callable[[str, str], bool]
_CITE = re.compile(r"\[(\d+)\]")
#: A citation number longer than this is noise (and ``int`` refuses more than 4,300 digits).
MAX_CITATION_DIGITS = 6
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass
class Statement:
    text: str
    citations: list[int]  # 1-based passage markers


@dataclass
class Thought:
    rationale: str
    answer: str
    statements: list[Statement] = field(default_factory=list)
    rec: float = 0.0
    prec: float = 0.0
    rho: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {"rationale": self.rationale, "answer": self.answer, "rec": self.rec, "prec": self.prec,
                "rho": self.rho, "statements": [{"text": s.text, "citations": s.citations} for s in self.statements]}


def split_statements(rationale: str, n_passages: int) -> list[Statement]:
    """Statements of a rationale with their (valid, 1-based) citation markers, markers removed
    from the text. Citation marks outside 1..n_passages (absurdly long numbers included) are
    dropped."""
    text = rationale.replace("Let's think step by step.", " ")
    out = []
    for raw in _SPLIT.split(text):
        raw = raw.strip()
        if not raw:
            continue
        cites = [n for n in (int(c) for c in _CITE.findall(raw) if len(c) <= MAX_CITATION_DIGITS) if 1 <= n <= n_passages]
        clean = " ".join(_CITE.sub(" ", raw).split()).rstrip(" .") + "."
        if len(clean) > 1:
            out.append(Statement(clean, list(dict.fromkeys(cites))))
    # a marker standing alone ("... Hall. [2]") belongs to the previous statement
    merged: list[Statement] = []
    for s in out:
        if merged and s.text == "." and s.citations:
            merged[-1].citations = list(dict.fromkeys(merged[-1].citations + s.citations))
        elif s.text != ".":
            merged.append(s)
    return merged


def citation_quality(statements: Sequence[Statement], passages: Sequence[str], entails: Entails) -> tuple[float, float]:
    """(REC, PREC) of one thought, ALCE style."""
    if not statements:
        return 0.0, 0.0
    recalls, precise, n_cites = [], 0, 0
    for s in statements:
        cited = [passages[c - 1] for c in s.citations]
        supported = bool(cited) and entails("\n".join(cited), s.text)
        recalls.append(1.0 if supported else 0.0)
        for c in s.citations:
            n_cites += 1
            if not supported:
                continue  # citations of an unsupported statement are not precise
            alone = entails(passages[c - 1], s.text)
            others = [passages[o - 1] for o in s.citations if o != c]
            rest = bool(others) and entails("\n".join(others), s.text)
            irrelevant = not alone and rest
            precise += 0 if irrelevant else 1
    rec = sum(recalls) / len(recalls)
    prec = precise / n_cites if n_cites else 0.0
    return rec, prec


def thought_quality(rec: float, prec: float, alpha: float, beta: float, gamma: float) -> float:
    """Eq. 1."""
    return alpha + beta * rec + gamma * prec


def vote(thoughts: Sequence[Thought]) -> tuple[str, float, dict[str, float]]:
    """Eqs. 2-3: the answer with the largest ρ-weighted vote, its confidence CI, and the votes
    by normalised answer. Ties go to the answer seen first. Empty answers do not vote and, as in
    the official code (``judge.py``), are not in CI's denominator either."""
    votes: dict[str, float] = {}
    surface: dict[str, str] = {}
    for t in thoughts:
        key = normalize_answer(t.answer)
        if not key:
            continue
        votes[key] = votes.get(key, 0.0) + t.rho
        surface.setdefault(key, t.answer)
    total = sum(votes.values())
    if not votes:
        return "", 0.0, {}
    best = max(votes, key=lambda k: (votes[k], -list(votes).index(k)))
    ci = votes[best] / total if total > 0 else 0.0
    return surface[best], ci, {surface[k]: v for k, v in votes.items()}


def passage_votes(thoughts: Sequence[Thought], passages: Sequence[str], entails: Entails | None) -> list[float]:
    """Eqs. 4-6: ν̄(p) for each passage (``entails=None``: citation markers only)."""
    nu_hat = [0.0] * len(passages)
    for t in thoughts:
        for k, p in enumerate(passages):
            delta = 0
            for s in t.statements:
                if (k + 1) in s.citations or (entails is not None and entails(p, s.text)):
                    delta += 1
            nu_hat[k] += t.rho * delta
    top = max(nu_hat, default=0.0)
    return [v / top if top > 0 else 0.0 for v in nu_hat]


def normalize_scores(scores: Sequence[float | None]) -> list[float]:
    """σ(p, 0): retriever scores divided by the largest (clipped to [0, 1])."""
    vals = [max(0.0, float(s or 0.0)) for s in scores]
    top = max(vals, default=0.0)
    return [v / top if top > 0 else 0.0 for v in vals]


def update_sigma(sigma: float, nu_bar: float, ci: float, w: tuple[float, float, float]) -> float:
    """Eq. 8."""
    return w[0] * sigma + w[1] * nu_bar + w[2] * ci
