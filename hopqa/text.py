"""Answer text: SQuAD normalisation and exact match, below both the methods and the evaluation.

Methods compare answers while they run (HGOT's votes, GenSco's and Self-DC's deduplication,
bootstrapping's correctness filter) and the evaluation scores them
(``hopqa.evaluation.metrics``): both use these functions, so a method never imports the
evaluation layer.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, strip punctuation and the articles a/an/the, collapse
    whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (or alias), else 0.0."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in golds if g is not None))
