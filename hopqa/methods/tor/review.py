"""Reading a paragraphs review (Tables 7, 8, 13) and a missing-paragraph completion (Table 9).

A review is asked for three things in order: a relevance judgment (``[RELEVANT]`` /
``[IRRELEVANT]``), a support judgment (``[SUPPORTED]`` / ``[UNSUPPORTED]``) and an output
(``[ANSWER] ...`` or ``[QUERY] ...``), each Thought-first in Tables 7 and 13. The paper found
that models under 20B parameters keep to this format less than 85% of the time, so
``parse_review`` reads it forgivingly and says how (``hopqa.methods.structured.Parsed``):

- ``direct``: both judgments as the bracketed upper-case tags of the format (the support
  judgment may be absent after ``[IRRELEVANT]``, where the review ends), and for a relevant
  review the ``[ANSWER]`` or ``[QUERY]`` its support judgment calls for, with text.
- ``fallback``: a forgiving rule was needed: a tag in lower case or without brackets on a
  ``Judgment:`` line ("Judgment: relevant"), "not relevant" / "not supported", a judgment
  inferred from the other (``[SUPPORTED]`` without a relevance judgment is relevant; an
  ``[ANSWER]`` without judgments is relevant and supported; a relevance judgment and a
  ``[QUERY]`` without a support judgment is unsupported), an output whose tag contradicts the
  support judgment (the tag wins: a review that says supported and asks a query searches), or
  an output tag without text.
- ``failed``: no relevance judgment could be read or inferred, or a relevant review with
  neither a support judgment nor an output. The tree search then takes its documented action
  for an unreadable review, **Reject** (``hopqa.methods.tor.method``).

A line that offers both alternatives ("Judgment: [RELEVANT] or [IRRELEVANT]", the format's own
words copied back) decides nothing. Tags in a Thought do not count: only the judgment lines and,
when there are none, bracketed tags anywhere. The parsers run in time linear in the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hopqa.methods.structured import Parsed, direct, failed, fallback

#: Words of a tag, longest first so that IRRELEVANT is not read as RELEVANT.
_RELEVANCE = re.compile(r"(\[\s*)?\b(irrelevant|not\s+relevant|relevant)\b(\s*\])?", re.IGNORECASE)
_SUPPORT = re.compile(r"(\[\s*)?\b(unsupported|not\s+supported|supported)\b(\s*\])?", re.IGNORECASE)
_OUTPUT_TAG = re.compile(r"\[\s*(answer|query)\s*\]", re.IGNORECASE)
_BARE_OUTPUT = re.compile(r"^\W*output\s*:\s*(answer|query)\s*[:\-]\s*", re.IGNORECASE)
_THOUGHT = re.compile(r"^\W*thought\s*:\s*(.*)$", re.IGNORECASE)
_JUDGMENT_LINE = re.compile(r"^\W*judge?ment\s*:", re.IGNORECASE)
_INFO = re.compile(r"\[\s*info\s*\]", re.IGNORECASE)
_INFO_LINE = re.compile(r"^\W*information\s*:\s*", re.IGNORECASE)
_INFO_END = re.compile(r"(\[\s*answer\s*\]|^\W*answer\s*:|^\W*step\s*2)", re.IGNORECASE | re.MULTILINE)
#: Words kept of a generated query (a model can run on; a retriever needs no essay).
MAX_QUERY_WORDS = 80


@dataclass(frozen=True)
class Review:
    """What a review decided: ``relevant``, ``supported``; the ``answer`` or ``query`` text of
    its output; ``thought`` (Step 2's reasoning path, Tables 7 and 13; '' in Table 8)."""

    relevant: bool
    supported: bool
    answer: str = ""
    query: str = ""
    thought: str = ""

    @property
    def analysis(self) -> str:
        """The brief analysis of an accepted path (§3.2: the answer to Q from the path's
        documents): Step 2's reasoning path, then the answer."""
        return " ".join(part for part in (self.thought, self.answer) if part)


def _judgment(lines: list[str], pattern: re.Pattern[str], negatives: tuple[str, ...]) -> tuple[bool | None, bool]:
    """(value, exact) of the first line deciding the judgment of ``pattern``; a line with both
    alternatives decides nothing. ``exact``: a bracketed upper-case tag."""
    for line in lines:
        found = {
            (
                m.group(2).lower().replace(" ", "").replace("\t", ""),
                bool(m.group(1) and m.group(3)),
                m.group(2).isupper(),
            )
            for m in pattern.finditer(line)
        }
        values = {word not in negatives for word, _, _ in found}
        if len(values) == 1:
            word, bracketed, upper = next(iter(found))
            return word not in negatives, bracketed and upper and len(found) == 1
    return None, False


def _is_format_text(text: str, match: re.Match[str]) -> bool:
    """A tag that describes the format rather than fills it: in brackets, or one of
    alternatives — "A special token ([ANSWER] or [QUERY]) follow with ...", "([INFO])" — the
    prompt's own words, which a small model sometimes copies back."""
    before = text[max(0, match.start() - 1):match.start()]
    after = text[match.end():match.end() + 5].lstrip()
    return before == "(" or after.startswith(")") or after.lower().startswith("or [")


def _output(text: str) -> tuple[str, str, bool]:
    """(kind, text, exact) of the review's output: the last ``[ANSWER]`` / ``[QUERY]`` tag (not
    the format's own words, ``_is_format_text``) and the rest of its line; else an
    ``Output: answer: ...`` line (not exact); ('', '', False) if none."""
    last = None
    for match in _OUTPUT_TAG.finditer(text):
        if not _is_format_text(text, match):
            last = match
    if last is not None:
        rest = text[last.end() :].split("\n", 1)[0]
        return (
            last.group(1).lower(),
            " ".join(rest.strip(" :-").split()),
            last.group(0).isupper(),
        )
    for line in text.splitlines():
        m = _BARE_OUTPUT.match(line)
        if m:
            return m.group(1).lower(), " ".join(line[m.end() :].split()), False
    return "", "", False


def parse_review(text: str) -> Parsed[Review]:
    """A review's judgments and output, and how they were read (module docstring)."""
    lines = text.splitlines()
    judgment_lines = [ln for ln in lines if _JUDGMENT_LINE.match(ln)]
    if judgment_lines:
        relevant, rel_exact = _judgment(judgment_lines, _RELEVANCE, ("irrelevant", "notrelevant"))
        supported, sup_exact = _judgment(judgment_lines, _SUPPORT, ("unsupported", "notsupported"))
    else:  # no judgment lines: bracketed tags anywhere (a Thought's bare words do not count)
        bracketed = [ln for ln in lines if "[" in ln]
        relevant, rel_exact = _judgment(
            bracketed,
            re.compile(r"(\[\s*)\b(irrelevant|relevant)\b(\s*\])", re.IGNORECASE),
            ("irrelevant",),
        )
        supported, sup_exact = _judgment(
            bracketed,
            re.compile(r"(\[\s*)\b(unsupported|supported)\b(\s*\])", re.IGNORECASE),
            ("unsupported",),
        )
        rel_exact = sup_exact = False  # the judgment lines were not kept
    kind, out, out_exact = _output(text)
    thoughts = [m.group(1).strip() for ln in lines if (m := _THOUGHT.match(ln))]
    thought = thoughts[1] if len(thoughts) >= 2 else ""
    rules: list[str] = []
    if relevant is None:
        if supported or kind == "answer":
            relevant = True
            rules.append("relevance inferred from " + ("the support judgment" if supported else "an answer"))
        else:
            return failed("no relevance judgment")
    if not relevant:  # its output is kept: without relevance pruning (and in CoR) its query is searched
        review = Review(relevant=False, supported=False, answer=out if kind == "answer" else "",
                        query=out if kind == "query" else "", thought=thought)
        return direct(review, "irrelevant") if rel_exact else fallback(review, "irrelevant (lenient tag)")
    if supported is None:
        if not kind:
            return failed("relevant, but neither a support judgment nor an output")
        supported = kind == "answer"
        rules.append(f"support inferred from the [{kind.upper()}] output")
    if kind and (kind == "answer") != supported:
        rules.append(f"[{kind.upper()}] contradicts the support judgment: the output wins")
        supported = kind == "answer"
    if kind and not out:
        rules.append(f"[{kind.upper()}] without text")
    if not kind:
        rules.append("no [ANSWER] / [QUERY] output")
    if not (rel_exact and sup_exact and out_exact):
        rules.append("lenient tag")
    review = Review(
        relevant=True,
        supported=supported,
        answer=out if kind == "answer" else "",
        query=out if kind == "query" else "",
        thought=thought,
    )
    how = "supported" if supported else "unsupported"
    return fallback(review, how + ": " + "; ".join(rules)) if rules else direct(review, how)


def cap_query(text: str) -> str:
    """A generated query cut to ``MAX_QUERY_WORDS`` words, whitespace collapsed."""
    return " ".join(text.split()[:MAX_QUERY_WORDS])


def parse_mpc(text: str) -> Parsed[str]:
    """The ``[INFO]`` of a missing-paragraph completion (Table 9), the new query: ``direct``
    after the tag (up to the answer), ``fallback`` after an ``Information:`` line without the
    tag, ``failed`` when neither is there or it is empty. The format's own words copied back
    ("Information: A special token ([INFO]) follow with ...", seen on Qwen) are no information."""
    m = next((x for x in _INFO.finditer(text) if not _is_format_text(text, x)), None)
    if m is not None:
        start, how = m.end(), "[INFO]"
    else:
        start = -1
        for line_match in re.finditer(r"^.*$", text, re.MULTILINE):
            lm = _INFO_LINE.match(line_match.group(0))
            if lm and not _INFO.search(line_match.group(0)):  # not the format's "([INFO]) follow with ..."
                start = line_match.start() + lm.end()
                break
        if start < 0:
            return failed("no [INFO]")
        how = "Information: line without [INFO]"
    end = _INFO_END.search(text, start)
    info = cap_query(text[start : end.start() if end else len(text)].strip(" :-\n"))
    if not info:
        return failed("empty [INFO]")
    return direct(info, how) if m is not None else fallback(info, how)
