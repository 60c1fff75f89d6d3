"""Forgiving parsers for small models' sloppy answers.

``extract_answer`` finds the short answer in free text: after a marker ("So the answer is:",
"Answer:", "the answer is"), else the first non-empty line. It returns the answer and how it
was found, so a method can record a fallback in its trace.

``clean_answer`` peels what wraps an answer without touching what belongs to it: markdown
emphasis, a bracket or quote pair around the *whole* answer, an unpaired bracket or quote at
either end, and one final full stop (not an initial's, "Jr.", "D.C."). Balanced brackets and
quotes stay: "Titanic (1997 film)" and '"Heat" (1995)' are answers as they are.

``strip_labels`` removes a prompt's field labels ("Rewrite:") that a reply wrote again at its start.

Every parser here runs in time linear in its input (no regular expression with overlapping
quantifiers on an unanchored search): a model can reply with 100,000 characters of noise.
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

#: Markdown emphasis / code marks, always peeled off the ends.
_EMPHASIS = frozenset("*_`")
#: Opening -> closing bracket (curly quotes and guillemets pair like brackets).
_PAIRS = {"(": ")", "[": "]", "{": "}", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb"}
_CLOSERS = {c: o for o, c in _PAIRS.items()}
_BRACKET_RE = re.compile("[" + re.escape("".join(_PAIRS) + "".join(_CLOSERS)) + "]")
#: Quotes that open and close with the same character.
_QUOTES = frozenset("\"'")
_QUOTE_RE = re.compile("[\"']")
#: Characters that are apostrophes, not quotes, between two letters or digits ("Ocean's").
_APOSTROPHES = frozenset("'\u2019")


def _is_apostrophe(t: str, k: int) -> bool:
    return t[k] in _APOSTROPHES and 0 < k < len(t) - 1 and t[k - 1].isalnum() and t[k + 1].isalnum()


def _bracket_partners(t: str) -> dict[int, int]:
    """Index -> index of its partner for every bracket of ``t`` that has one (one stack per
    bracket kind, so "([)]" pairs both). Unpaired brackets are absent. Linear."""
    partner: dict[int, int] = {}
    stacks: dict[str, list[int]] = {o: [] for o in _PAIRS}
    for m in _BRACKET_RE.finditer(t):
        k, ch = m.start(), m.group()
        if _is_apostrophe(t, k):
            continue
        if ch in _PAIRS:
            stacks[ch].append(k)
        elif stacks[_CLOSERS[ch]]:
            o = stacks[_CLOSERS[ch]].pop()
            partner[o], partner[k] = k, o
    return partner


def _is_abbreviation_end(t: str, i: int, j: int) -> bool:
    """Whether ``t[i:j+1]`` (ending in '.') ends with an initial or a short abbreviation:
    "F.", "Jr.", "D.C." (an upper-case letter, maybe one lower-case, after a space, a full stop
    or the start)."""
    def boundary(k: int) -> bool:
        return k < i or t[k].isspace() or t[k] == "."

    if j - 1 >= i and t[j - 1].isupper() and boundary(j - 2):
        return True
    return j - 2 >= i and t[j - 2].isupper() and t[j - 1].islower() and boundary(j - 3)


def clean_answer(text: str) -> str:
    """Strip surrounding space, markdown emphasis, a bracket or quote pair around the whole
    answer, unpaired brackets or quotes at either end, and one trailing full stop (see the
    module docstring); collapse inner whitespace. Linear in the length of ``text``."""
    t = text
    partner = _bracket_partners(t)
    quotes = dict.fromkeys(_QUOTES, 0)  # quotes (not apostrophes) left in t[i:j+1], by kind
    for m in _QUOTE_RE.finditer(t):
        if not _is_apostrophe(t, m.start()):
            quotes[m.group()] += 1
    i, j = 0, len(t) - 1
    period_done = False
    while i <= j:
        a, b = t[i], t[j]
        if a.isspace() or a in _EMPHASIS:
            i += 1
        elif b.isspace() or b in _EMPHASIS:
            j -= 1
        elif i < j and partner.get(i) == j:  # a bracket pair around everything
            i, j = i + 1, j - 1
        elif a in _CLOSERS or (a in _PAIRS and i not in partner):  # an unpaired bracket at the start
            i += 1
        elif b in _PAIRS or (b in _CLOSERS and j not in partner):  # an unpaired bracket at the end
            j -= 1
        elif b in _QUOTES and quotes[b] % 2 == 1 and not _is_apostrophe(t, j):  # odd quotes: the last one
            quotes[b] -= 1
            j -= 1
        elif a in _QUOTES and quotes[a] == 1 and not _is_apostrophe(t, i):  # a lone quote at the start
            quotes[a] -= 1
            i += 1
        elif i < j and a == b and a in _QUOTES and quotes[a] == 2:  # a quote pair around everything
            quotes[a] -= 2
            i, j = i + 1, j - 1
        elif b == "." and not period_done and not _is_abbreviation_end(t, i, j):
            period_done = True
            j -= 1
        else:
            break
    return " ".join(t[i:j + 1].split())


def extract_answer(text: str) -> tuple[str, str]:
    """(answer, how): how is 'marker:<pattern>', 'first-line' or 'empty'."""
    if not text or not text.strip():
        return "", "empty"
    for rx in _MARKER_RE:
        last = None
        for last in rx.finditer(text):
            pass
        if last is not None:
            answer = clean_answer(first_line_after(text, last.end()))
            if answer:
                return answer, f"marker:{rx.pattern}"
    for line in text.splitlines():
        if line.strip():
            return clean_answer(line), "first-line"
    return "", "empty"


#: Leading whitespace (blank lines too), then one line (the line breaks of ``str.splitlines``).
_NEXT_LINE = re.compile(r"\s*([^\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]*)")


def first_line_after(text: str, pos: int) -> str:
    """The first non-blank line of ``text[pos:]`` ('' if none), without copying the rest."""
    m = _NEXT_LINE.match(text, pos)
    return m.group(1) if m else ""


def strip_labels(text: str, label: re.Pattern[str]) -> tuple[str, bool]:
    """``text`` without the labels ``label`` matches at its start, one after another, and whether
    there were any: a prompt's field label that a small model wrote again ("Rewrite: When was
    ...?", HGOT; "Question: ...", "Subquestion 2: ...", GenSco). Anything else stays as it is.
    Linear in the length of ``text`` for a ``label`` that matches one label with its spaces."""
    pos = 0
    while (m := label.match(text, pos)) is not None and m.end() > pos:
        pos = m.end()
    return text[pos:], pos > 0


def first_sentence(text: str) -> str:
    """The first sentence of a generation (IRCoT keeps one new reasoning sentence per step)."""
    text = " ".join(text.strip().split())
    m = re.search(r"(?<=[a-z0-9)\]\"'][.!?])\s+(?=[A-Z\"'(])", text)
    return text[: m.start()].strip() if m else text
