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

The output is Step 3's: the first ``[ANSWER]`` / ``[QUERY]`` tag on an ``Output:`` line; without
one, the first tag after a ``Step 3`` header; else the first tag that begins a line; else the
first anywhere. A later tag does not override it: "[ANSWER] Ada" followed by a line "No
[QUERY] needed." accepts Ada. The thought is read by step: Step 2's ``Thought:`` (the
reasoning path) for a relevant review, Step 1's for an irrelevant one; without ``Step``
headers, the second (first) ``Thought:`` line by position.

A line that offers both alternatives ("Judgment: [RELEVANT] or [IRRELEVANT]", the format's own
words copied back) decides nothing, nor do the format's own output words ("A special token
([ANSWER] or [QUERY]) ...", "[ANSWER] if you can answer the question, otherwise [QUERY]"). Tags
in a Thought do not count: only the judgment lines and, when there are none, bracketed tags
anywhere. The parsers run in time linear in the reply (each line is looked at once; the end of
an ``[INFO]`` is searched line by line, never across line breaks).

Structured outputs (``structured``, ``hopqa.methods.structured``): a schema-constrained review
sends the same prompt followed by ``review_instruction`` and is asked for ``review_schema``:
``{"thought": str, "relevance": "relevant"|"irrelevant", "support": "supported"|"unsupported",
"answer": str, "query": str}`` (the thought first, the evidence before the judgments; Table 8's
review has no ``thought``). ``review_from_json`` reads it into the same ``Review`` (None, a
``failed`` parse, without a relevance judgment or, for a relevant review, a support judgment)
and ``review_text`` writes a ``Review`` back in the demonstrations' tag format for the trace. A
missing-paragraph completion asks for ``{"info": str}`` (``MPC_SCHEMA``, ``read_mpc``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hopqa.methods.structured import (
    Parsed,
    direct,
    failed,
    fallback,
    json_reply,
    object_schema,
    read,
)

#: Words of a tag, longest first so that IRRELEVANT is not read as RELEVANT.
_RELEVANCE = re.compile(r"(\[\s*)?\b(irrelevant|not\s+relevant|relevant)\b(\s*\])?", re.IGNORECASE)
_SUPPORT = re.compile(r"(\[\s*)?\b(unsupported|not\s+supported|supported)\b(\s*\])?", re.IGNORECASE)
_OUTPUT_TAG = re.compile(r"\[\s*(answer|query)\s*\]", re.IGNORECASE)
_BARE_OUTPUT = re.compile(r"^\W*output\s*:\s*(answer|query)\s*[:\-]\s*", re.IGNORECASE)
_OUTPUT_LINE = re.compile(r"[^\w\n]*output[ \t]*:", re.IGNORECASE)
_STEP_LINE = re.compile(r"^\W*step[ \t]*(\d)(?!\d)", re.IGNORECASE)
_STEP3_LINE = re.compile(r"^[^\w\n]*step[ \t]*3(?!\d)", re.IGNORECASE | re.MULTILINE)
_WORD = re.compile(r"\w")
_THOUGHT = re.compile(r"^\W*thought\s*:\s*(.*)$", re.IGNORECASE)
_JUDGMENT_LINE = re.compile(r"^\W*judge?ment\s*:", re.IGNORECASE)
_INFO = re.compile(r"\[\s*info\s*\]", re.IGNORECASE)
_INFO_LINE = re.compile(r"^\W*information\s*:\s*", re.IGNORECASE)
#: Where an ``[INFO]`` ends: an ``[ANSWER]`` tag, or a line starting ``Answer:`` or ``Step 2``. The
#: line's lead is ``[^\w\n]*``, not ``\W*``: a ``\W*`` also crosses line breaks, so that each line
#: start of a run of blank lines rescanned the whole run (quadratic: 4 s at 10,000 characters).
_INFO_END = re.compile(r"\[\s*answer\s*\]|^[^\w\n]*(?:answer\s*:|step\s*2)", re.IGNORECASE | re.MULTILINE)
#: Words kept of a generated query (a model can run on; a retriever needs no essay).
MAX_QUERY_WORDS = 80


@dataclass(frozen=True)
class Review:
    """What a review decided: ``relevant``, ``supported``; the ``answer`` or ``query`` text of
    its output; ``thought`` (Step 2's reasoning path, Tables 7 and 13, or Step 1's thought of an
    irrelevant review; '' in Table 8)."""

    relevant: bool
    supported: bool
    answer: str = ""
    query: str = ""
    thought: str = ""

    @property
    def analysis(self) -> str:
        """The review's own stand-in for an accepted path's brief analysis, without a call
        (``analysis=review``; by default the method asks for it, §3.2): Step 2's reasoning path,
        then the answer — the bare answer under Table 8, which has no thoughts."""
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


def _thought(lines: list[str], step: int) -> str:
    """The ``Thought:`` of Step ``step``: the first after that step's header (on the header's
    line or below it, before the next header); without ``Step`` headers, the ``step``-th
    ``Thought:`` line by position; '' if there is none."""
    current, headers, by_position = 0, False, []
    for line in lines:
        header = _STEP_LINE.match(line)
        if header:
            headers, current = True, int(header.group(1))
            line = line[header.end():]
        m = _THOUGHT.match(line)
        if m is None:
            continue
        if headers and current == step:
            return m.group(1).strip()
        by_position.append(m.group(1).strip())
    return "" if headers or len(by_position) < step else by_position[step - 1]


def _is_format_text(text: str, match: re.Match[str]) -> bool:
    """A tag that describes the format rather than fills it: in brackets, or one of
    alternatives — "A special token ([ANSWER] or [QUERY]) follow with ...", "([INFO])", Step 3's
    "[ANSWER] if you can answer the question, otherwise [QUERY]" — the prompt's own words, which
    a small model sometimes copies back."""
    before = text[max(0, match.start() - 10):match.start()].lower()
    after = text[match.end():match.end() + 20].lstrip().lower()
    return (before.endswith("(") or before.endswith("otherwise ") or after.startswith(")")
            or after.startswith("or [") or after.startswith("if you can"))


def _step3_output(text: str) -> re.Match[str] | None:
    """Step 3's output tag (module docstring): the first ``[ANSWER]`` / ``[QUERY]`` tag, not the
    format's words, on an ``Output:`` line; else after the first ``Step 3`` header; else the
    first that begins its line; else the first. Linear: each line is classified once."""
    tags = [m for m in _OUTPUT_TAG.finditer(text) if not _is_format_text(text, m)]
    if not tags:
        return None
    step3 = _STEP3_LINE.search(text)
    after_step3 = next((m for m in tags if step3 is not None and m.start() > step3.start()), None)
    on_output_line = starts_line = None
    line_start, seen, line = 0, 0, None  # ``line``: (is an Output: line, where its first word starts)
    for m in tags:
        newline = text.rfind("\n", seen, m.start())  # only the text since the previous tag
        seen = m.start()
        if newline >= 0 or line is None:
            line_start = newline + 1 if newline >= 0 else line_start
            word = _WORD.search(text, line_start, m.end())
            line = (bool(_OUTPUT_LINE.match(text, line_start, m.start())), word.start() if word else -1)
        if line[0] and on_output_line is None:
            on_output_line = m
        if starts_line is None and m.start() < line[1]:  # no word before the tag on its line
            starts_line = m
    return on_output_line or after_step3 or starts_line or tags[0]


def _output(text: str) -> tuple[str, str, bool]:
    """(kind, text, exact) of the review's output: Step 3's ``[ANSWER]`` / ``[QUERY]`` tag
    (``_step3_output``) and the rest of its line; else an ``Output: answer: ...`` line (not
    exact); ('', '', False) if none."""
    tag = _step3_output(text)
    if tag is not None:
        end = text.find("\n", tag.end())
        rest = text[tag.end() : end if end >= 0 else len(text)]
        return (
            tag.group(1).lower(),
            " ".join(rest.strip(" :-").split()),
            tag.group(0).isupper(),
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
    rules: list[str] = []
    if relevant is None:
        if supported or kind == "answer":
            relevant = True
            rules.append("relevance inferred from " + ("the support judgment" if supported else "an answer"))
        else:
            return failed("no relevance judgment")
    if not relevant:  # its output is kept: without relevance pruning (and in CoR) its query is searched
        review = Review(relevant=False, supported=False, answer=out if kind == "answer" else "",
                        query=out if kind == "query" else "", thought=_thought(lines, 1))
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
        thought=_thought(lines, 2),
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


# -- structured outputs (module docstring) -------------------------------------------------------------
#: Room for the JSON wrapper of a structured call (its keys, quotes and braces), in tokens.
JSON_TOKENS = 32
RELEVANCE = ("relevant", "irrelevant")
SUPPORT = ("supported", "unsupported")
#: An output tag copied into a JSON string ("[ANSWER] Ada"), dropped.
_LEAKED_TAG = re.compile(r"^\s*\[\s*(answer|query|info)\s*\]\s*:?\s*", re.IGNORECASE)


def review_schema(thoughts: bool) -> dict[str, Any]:
    """The JSON schema of a review: with a ``thought`` first (Tables 7 and 13) or without (Table 8)."""
    return object_schema({
        **({"thought": {"type": "string"}} if thoughts else {}),
        "relevance": {"type": "string", "enum": list(RELEVANCE)},
        "support": {"type": "string", "enum": list(SUPPORT)},
        "answer": {"type": "string"},
        "query": {"type": "string"},
    })


def review_instruction(thoughts: bool) -> str:
    """The line closing a schema-constrained review prompt (``json_reply``)."""
    return json_reply({
        **({"thought": "briefly, the reasoning path from the documents to the answer, or what information is "
                       "missing"} if thoughts else {}),
        "relevance": " | ".join(RELEVANCE),
        "support": " | ".join(SUPPORT),
        "answer": "the short answer when supported, else empty",
        "query": "a search query for the missing information when unsupported, else empty",
    })


def _json_text(obj: dict[str, Any], key: str) -> str:
    """A string field of a JSON reply, whitespace collapsed and a leaked output tag dropped ('' if not a string)."""
    value = obj.get(key)
    return _LEAKED_TAG.sub("", " ".join(value.split())) if isinstance(value, str) else ""


def review_from_json(obj: dict[str, Any]) -> Review | None:
    """A ``review_schema`` object as a ``Review``; None without a relevance judgment, or for a
    relevant review without a support judgment. As in free text an irrelevant review keeps its
    query (searched without relevance pruning and in CoR); a relevant review keeps the output its
    support judgment calls for, even empty (the method rejects a search without a query)."""
    relevance = obj.get("relevance")
    relevance = relevance.strip().lower() if isinstance(relevance, str) else None
    if relevance not in RELEVANCE:
        return None
    thought = _json_text(obj, "thought")
    if relevance == "irrelevant":
        return Review(relevant=False, supported=False, query=_json_text(obj, "query"), thought=thought)
    support = obj.get("support")
    support = support.strip().lower() if isinstance(support, str) else None
    if support not in SUPPORT:
        return None
    if support == "supported":
        return Review(relevant=True, supported=True, answer=_json_text(obj, "answer"), thought=thought)
    return Review(relevant=True, supported=False, query=_json_text(obj, "query"), thought=thought)


def review_text(review: Review) -> str:
    """``review`` in the demonstrations' format (``hopqa.methods.tor.prompts.ReviewDemo``), for the
    trace: Step 1's judgment, then for a relevant review Step 2's thought (the reasoning path,
    ``Review.thought``) and judgment and Step 3's output. An irrelevant review shows its thought
    under Step 1 and, when it has a query, the query under Step 3."""
    thought = [f"- Thought: {review.thought}"] if review.thought else []
    if not review.relevant:
        lines = ["Step 1", *thought, "- Judgment: [IRRELEVANT]"]
        if review.query:
            lines += ["Step 2", "- Judgment: [UNSUPPORTED]", "Step 3", f"- Output: [QUERY] {review.query}"]
        return "\n".join(lines)
    output = f"[ANSWER] {review.answer}" if review.supported else f"[QUERY] {review.query}"
    return "\n".join([
        "Step 1", "- Judgment: [RELEVANT]",
        "Step 2", *thought, "- Judgment: " + ("[SUPPORTED]" if review.supported else "[UNSUPPORTED]"),
        "Step 3", "- Output: " + output.rstrip(),
    ])


def review_outputs(text: str, review: Review | None, structured: bool) -> dict[str, str]:
    """A review step's trace outputs: ``review``, the reply (free text) or, for a structured
    review that was read, ``review_text`` of it; and, when structured, ``raw``, the reply as it came."""
    if not structured:
        return {"review": text}
    return {"review": review_text(review) if review is not None else text, "raw": text}


#: A missing-paragraph completion's schema and the line closing its prompt.
MPC_SCHEMA = object_schema({"info": {"type": "string"}})
MPC_INSTRUCTION = json_reply({"info": "the missing information you supply from your knowledge"})


def mpc_from_json(obj: dict[str, Any]) -> str | None:
    """An ``MPC_SCHEMA`` object's information as the new query (``cap_query``); None when empty."""
    return cap_query(_json_text(obj, "info")) or None


def read_mpc(text: str, structured: bool, schema_ignored: bool = False) -> Parsed[str]:
    """A completion read as ``parse_mpc`` reads it, or, under a schema, as ``read`` reads JSON
    (falling back to ``parse_mpc`` for a reply without a JSON object). No parse record: the parse
    rate counts the reviews only, in both modes; the expansion's status is its step's ``parsed``
    output)."""
    if not structured:
        return parse_mpc(text)
    return read(text, True, mpc_from_json, parse_mpc, field="info", schema_ignored=schema_ignored, record=False)
