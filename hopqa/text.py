"""Text below both the methods and the evaluation: answer normalisation and the one passage
renderer.

Methods compare answers while they run (HGOT's votes, GenSco's and Self-DC's deduplication,
bootstrapping's correctness filter) and the evaluation scores them
(``hopqa.evaluation.metrics``): both use these functions, so a method never imports the
evaluation layer.

``render_passages`` is how every method shows passages to its LLM; where methods differ
(numbering, word caps per passage or in total, separators) it takes options, so a prompt's
passage block is one call with the method's options rather than a renderer of its own.
This module is in the same layer as ``hopqa.types`` and may not import it: passages are read
through the ``_Titled`` protocol (a ``title`` and a ``text``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Protocol

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
#: ``str.translate`` table that deletes ASCII punctuation (``string.punctuation``, as SQuAD's script).
_NO_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, strip punctuation and the articles a/an/the, collapse
    whitespace."""
    text = text.lower()
    text = text.translate(_NO_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (or alias), else 0.0."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in golds if g is not None))


# -- passages as an LLM sees them ---------------------------------------------------------------


class _Titled(Protocol):
    """What the renderer reads from a passage (``hopqa.types.Passage``; the layers keep this
    module from importing it)."""

    title: str
    text: str


def cap_words(text: str, max_words: int | None) -> str:
    """``text`` cut to its first ``max_words`` words and " ..." when it is longer (unchanged,
    spacing and all, when it is not or when ``max_words`` is None)."""
    if max_words is None:
        return text
    words = text.split()
    return " ".join(words[:max_words]) + " ..." if len(words) > max_words else text


def render_passage(passage: _Titled, index: int | None = None, max_words: int | None = None,
                   title_separator: str = " | ") -> str:
    """One passage: ``[index] Title | text`` (no ``[index] `` when ``index`` is None, no
    ``Title | `` when it has no title), the text cut to ``max_words``."""
    head = f"[{index}] " if index is not None else ""
    text = cap_words(passage.text, max_words)
    return f"{head}{passage.title}{title_separator}{text}" if passage.title else f"{head}{text}"


#: The smallest per-passage share of ``total_words``: a long list still shows each passage's opening.
MIN_SHARE_WORDS = 20


def render_passages(passages: Sequence[_Titled], *, numbered: bool = True, start: int = 1,
                    max_words: int | None = None, total_words: int | None = None,
                    separator: str = "\n\n", title_separator: str = " | ") -> str:
    """The one passage renderer: every method shows passages to its LLM through it.

    - ``numbered``: ``[1] Title | text`` (from ``start``, for citations) or ``Title | text``;
    - ``max_words``: each passage's text cut to that many words (then " ...");
    - ``total_words``: the per-passage cut shrunk to ``max(MIN_SHARE_WORDS, total_words // n)``
      so that n passages together stay near that many words (a small model's context is short);
    - ``separator``: between passages ("\\n\\n" one per paragraph, "\\n" one per line, " " run-on);
    - ``title_separator``: between the title and the text.

    Who uses which: the readers of Retrieve-then-Read, Self-Ask, IRCoT, ITER-RETGEN and GenRead
    (numbered, blank-line separated; GenRead's single generated document is passed as it is);
    GenSco (unnumbered, one per line, Tables 6-9); Self-DC (unnumbered, run-on, Table 21's single
    ``Passage:``); HGOT (numbered, one per line, C.5).
    """
    if total_words is not None and passages:
        share = max(MIN_SHARE_WORDS, total_words // len(passages))
        max_words = min(max_words, share) if max_words is not None else share
    return separator.join(render_passage(p, start + i if numbered else None, max_words, title_separator)
                          for i, p in enumerate(passages))
