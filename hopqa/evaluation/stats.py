"""Statistics over questions: bootstrap intervals of a run's figures and paired comparisons of
two runs on the same questions (no plotting, no files: ``report`` presents what this computes).

- ``interval(num, den)`` — a figure that is a ratio of per-question sums, ``sum(num) / sum(den)``
  (a mean is ``den`` all ones; a pooled rate such as the parse rate counts per question), with
  its percentile bootstrap interval over questions: ``RESAMPLES`` resamples of the questions
  with replacement, the 2.5th and 97.5th percentiles of the figure over them (Efron &
  Tibshirani 1993). A resample whose ``den`` sums to 0 has no figure and is left out.
- ``compare(a, b)`` — two methods' values on the same questions (paired by position; the
  report pairs them by question id): the mean difference ``a - b``, its paired bootstrap 95 %
  interval (the questions resampled together, Koehn 2004), a two-sided p-value from the paired
  permutation (sign-flip) test — each question's difference keeps or flips its sign at
  random; the p-value is the share of sign patterns whose mean difference is at least as far
  from 0 as the observed one, counting the observed pattern (Dror et al. 2018 recommend it for
  means of per-item scores); exact over every pattern up to ``EXACT_MAX`` questions, else
  ``PERMUTATIONS`` random ones —, the wins, ties and losses, and the questions the observed
  spread would need for an interval of ``±half_width`` (``n = (1.96 sd / half_width)^2``).
  ``Comparison.significant``: the interval excludes 0 and p < 0.05 (the interval alone is too
  narrow when only a few questions differ).

Every figure depends only on its inputs and ``seed`` (default ``SEED``): a report is the same
each time it is made.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

#: Bootstrap resamples of an interval.
RESAMPLES = 2000
#: Random sign patterns of the permutation test (above ``EXACT_MAX`` questions).
PERMUTATIONS = 10000
#: Up to this many questions (with a non-zero difference) the permutation test is exact.
EXACT_MAX = 16
#: The seed of every resampling (fixed: reports are reproducible).
SEED = 0
#: The two-sided level of every interval.
LEVEL = 0.95
#: Resamples drawn at a time (bounds the memory of a resample matrix of a large run).
_CHUNK_CELLS = 2_000_000


@dataclass(frozen=True)
class Interval:
    """A figure and the ends of its 95 % bootstrap interval (``nan`` ends: no interval)."""

    value: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class Comparison:
    """Method A against method B on the same ``n`` questions (see ``compare``)."""

    n: int
    diff: float
    low: float
    high: float
    p_value: float
    wins: int
    ties: int
    losses: int
    needed: int | None  # questions for an interval of ±half_width (None: no spread, or n < 2)

    @property
    def excludes_zero(self) -> bool:
        """The interval excludes 0."""
        return self.low > 0 or self.high < 0

    @property
    def significant(self) -> bool:
        """The interval excludes 0 and the permutation test agrees (``p < 1 - LEVEL``). When
        only a few questions differ, the percentile bootstrap's interval is too narrow (a
        resample rarely misses all of them): 4 wins and 26 ties among 30 questions exclude 0
        from the interval, while the permutation test gives p = 2 / 2^4 = 0.125."""
        return self.excludes_zero and self.p_value < 1 - LEVEL


def _resampled_indices(n: int, resamples: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Index matrices of ``resamples`` resamples of ``n`` items, a bounded number of rows at a time."""
    rows = max(1, _CHUNK_CELLS // max(1, n))
    left = resamples
    while left > 0:
        take = min(rows, left)
        yield rng.integers(0, n, size=(take, n))
        left -= take


def interval(num: Sequence[float], den: Sequence[float] | None = None, resamples: int = RESAMPLES,
             seed: int = SEED, level: float = LEVEL) -> Interval:
    """``sum(num) / sum(den)`` over questions with its percentile bootstrap interval (module
    docstring); ``den`` defaults to ones (the mean). No questions, or ``den`` summing to 0: all
    ``nan``; a single question: its value and no interval (``nan`` ends)."""
    return intervals({"": (num, den)}, resamples, seed, level)[""]


def intervals(figures: dict[str, tuple[Sequence[float], Sequence[float] | None]], resamples: int = RESAMPLES,
              seed: int = SEED, level: float = LEVEL) -> dict[str, Interval]:
    """``interval`` of several figures over the same questions, drawn from the same resamples
    (each the same as drawn alone: one seed, one resample matrix)."""
    arrays = {}
    for key, (num, den) in figures.items():
        x = np.asarray(num, dtype=float)
        d = np.ones_like(x) if den is None else np.asarray(den, dtype=float)
        if x.shape != d.shape:
            raise ValueError(f"{key or 'the figure'}: num and den differ in length ({x.size} and {d.size})")
        arrays[key] = (x, d)
    sizes = {x.size for x, _ in arrays.values()}
    if len(sizes) > 1:
        raise ValueError(f"the figures cover different numbers of questions ({sorted(sizes)})")
    n = sizes.pop() if sizes else 0
    out = {key: Interval(math.nan, math.nan, math.nan) for key in arrays}
    live = {}
    for key, (x, d) in arrays.items():
        total = d.sum()
        if n and total != 0:
            out[key] = Interval(float(x.sum() / total), math.nan, math.nan)
            live[key] = (x, d)
    if n < 2 or not live:
        return out
    drawn: dict[str, list[np.ndarray]] = {key: [] for key in live}
    for idx in _resampled_indices(n, resamples, np.random.default_rng(seed)):
        for key, (x, d) in live.items():
            with np.errstate(invalid="ignore", divide="ignore"):
                drawn[key].append(x[idx].sum(axis=1) / d[idx].sum(axis=1))
    tail = (1 - level) / 2 * 100
    for key, parts in drawn.items():
        values = np.concatenate(parts)
        values = values[np.isfinite(values)]
        if values.size:
            low, high = np.percentile(values, [tail, 100 - tail])
            out[key] = Interval(out[key].value, float(low), float(high))
    return out


def permutation_p(diffs: Sequence[float], permutations: int = PERMUTATIONS, seed: int = SEED) -> float:
    """Two-sided p-value of the paired sign-flip permutation test of a mean difference of 0
    (module docstring): 1.0 when every difference is 0."""
    d = np.asarray(diffs, dtype=float)
    d = d[d != 0]  # a zero difference is the same under either sign
    if not d.size:
        return 1.0
    observed = abs(d.sum()) - 1e-12 * max(1.0, float(np.abs(d).sum()))  # rounding: ties count as extreme
    if d.size <= EXACT_MAX:
        patterns = ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        return float(np.mean(np.abs(patterns @ d) >= observed))
    rng = np.random.default_rng(seed)
    extreme = 0
    rows = max(1, _CHUNK_CELLS // d.size)
    left = permutations
    while left > 0:
        take = min(rows, left)
        signs = rng.integers(0, 2, size=(take, d.size)) * 2 - 1
        extreme += int(np.sum(np.abs(signs @ d) >= observed))
        left -= take
    return (extreme + 1) / (permutations + 1)  # the observed pattern is one of them


def needed_questions(diffs: Sequence[float], half_width: float = 0.05, level: float = LEVEL) -> int | None:
    """Questions a paired difference with this spread would need for an interval of
    ``±half_width`` (normal approximation); ``None`` with fewer than 2 or no spread."""
    d = np.asarray(diffs, dtype=float)
    if d.size < 2:
        return None
    sd = float(np.std(d, ddof=1))
    if sd == 0:
        return None
    z = _z(level)
    return math.ceil((z * sd / half_width) ** 2)


def _z(level: float) -> float:
    """The two-sided normal quantile of ``level`` (1.96 at 0.95)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def compare(a: Sequence[float], b: Sequence[float], resamples: int = RESAMPLES, permutations: int = PERMUTATIONS,
            seed: int = SEED, half_width: float = 0.05, level: float = LEVEL) -> Comparison:
    """Method A's per-question values against method B's on the same questions, in the same
    order (module docstring)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"a paired comparison needs the same questions: {x.size} values against {y.size}")
    d = x - y
    if not d.size:
        return Comparison(0, math.nan, math.nan, math.nan, math.nan, 0, 0, 0, None)
    spread = interval(d, resamples=resamples, seed=seed, level=level)
    return Comparison(n=int(d.size), diff=spread.value, low=spread.low, high=spread.high,
                      p_value=permutation_p(d, permutations, seed), wins=int(np.sum(d > 0)),
                      ties=int(np.sum(d == 0)), losses=int(np.sum(d < 0)),
                      needed=needed_questions(d, half_width, level))
