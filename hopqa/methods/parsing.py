"""Forgiving parsers for small models' sloppy answers.

``extract_answer`` finds the short answer in free text: after a marker ("So the answer is:",
"Answer:", "the answer is"), else the first non-empty line. It returns the answer and how it
was found, so a method can record a fallback in its trace.
"""

from __future__ import annotations

import re

_MARKERS = [
    r"so the final answer is\s*[:\-]?",
    r"so the answer is\s*[:\-]?",
    r"the final answer is\s*[:\-]?",
    r"final answer\s*[:\-]",
    r"the answer is\s*[:\-]?",
    r"(?<![a-z])answer\s*[:\-]",
]
_MARKER_RE = [re.compile(m, re.IGNORECASE) for m in _MARKERS]
_WRAPPERS = re.compile(r"^[\s\"'`*_(\[]+|[\s\"'`*_)\]]+$")


def clean_answer(text: str) -> str:
    """Strip quotes, markdown emphasis, a trailing period and surrounding space."""
    t = text.strip()
    t = _WRAPPERS.sub("", t)
    t = re.sub(r"\s+", " ", t)
    if t.endswith(".") and not re.search(r"(?:^|[\s.])[A-Z][a-z]?\.$", t):  # keep "Jr." / "D.C." / "F."
        t = t[:-1].rstrip()
    return _WRAPPERS.sub("", t)


def extract_answer(text: str) -> tuple[str, str]:
    """(answer, how): how is 'marker:<pattern>', 'first-line' or 'empty'."""
    if not text or not text.strip():
        return "", "empty"
    for rx in _MARKER_RE:
        matches = list(rx.finditer(text))
        if matches:
            rest = text[matches[-1].end():].strip()
            line = rest.splitlines()[0] if rest else ""
            answer = clean_answer(line)
            if answer:
                return answer, f"marker:{rx.pattern}"
    for line in text.splitlines():
        if line.strip():
            return clean_answer(line), "first-line"
    return "", "empty"


def render_passages(passages: list, max_words: int | None = None, total_words: int | None = None) -> str:
    """Passages numbered ``[1] Title | text`` one per paragraph.

    ``max_words`` cuts each passage; ``total_words`` additionally shrinks the per-passage cut so
    that all passages together stay within that many words (a small model's context is short).
    """
    if total_words is not None and passages:
        share = max(20, total_words // len(passages))
        max_words = min(max_words, share) if max_words is not None else share
    return "\n\n".join(p.render(i + 1, max_words=max_words) for i, p in enumerate(passages))


def first_sentence(text: str) -> str:
    """The first sentence of a generation (IRCoT keeps one new reasoning sentence per step)."""
    text = " ".join(text.strip().split())
    m = re.search(r"(?<=[a-z0-9)\]\"'][.!?])\s+(?=[A-Z\"'(])", text)
    return text[: m.start()].strip() if m else text
