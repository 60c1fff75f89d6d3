"""An answer held to the candidates a "which of A or B" question names (issue 33).

A comparison question names its candidates and asks for one of them: "Which film came out
first, Blind Shaft or The Mask of Fu Manchu?", "Who was born first out of Martin Hodge and
Ivania Martinich?". A small model reading the passages of such a question answers with the
entity the comparison goes through — the director where the film is asked, a date where the
person is asked — which scores 0 whatever the comparison found; or it names a candidate, but
compares the two dates it read wrongly.

``candidates`` reads the two candidates off the question's wording: a wh-question whose clause
after its first comma is ``A or B`` (a clause going on after the second candidate, "Which band,
A or B, had more members?", ends at its comma); or, with a word of comparison ("first",
"older", "more", ...: ``COMPARING_WORDS``), ``... out of A and B``, ``... between A and B``,
``Between A and B, which ...``, a wh-head ending on the word of comparison with no comma before
the names ("Which band was formed first The Exies or Circus Diablo?", ``_head_then_names``), or a
question opening on its verb ("Was A or B born first?", "Did A or B have more children?": the
second candidate is the run of name words after "or", ``name_run``). Anything else (a yes / no
question, a question with no such clause, a clause with more than one "or", "Which river forms
the border between A and B?", "Is A or B the capital?") has none, and its answer is left alone.

``hold_to_choice`` then settles the answer, recorded as a ``choice`` step (``how``):

- ``compared``: a question that compares two dates ("born first", "released more recently",
  "younger", "died later": ``date_direction`` reads which end it asks for from its words) has the
  model write each candidate's date from the passages (``DATES_PROMPT``: "A: date", "B: date"),
  and the dates are compared here, not by the model: a 1.5B
  model that writes "born on October 6, 1988" and "born on February 27, 1975" correctly often
  names the wrong one as older. Used when both lines hold a date (``parse_date``: a year, with
  its month and day when written) and they differ at the precision both give;
- ``named``: else, an answer naming exactly one candidate is that candidate, in the question's
  own words;
- ``asked``: else (it names neither or both) the model is asked once more, with the passages, to
  answer with one of the two (``CHOICE_PROMPT``); a reply naming neither keeps the first answer
  (noted).

Not in any paper: a method offers it as an option (``choice``, off by default), in its
``small-model`` preset. Every parser here is linear in its input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hopqa.llm.base import LLMBase
from hopqa.methods.parsing import clean_answer, first_line_after
from hopqa.methods.shorten import in_reply
from hopqa.text import normalize_answer, render_passages
from hopqa.trace import step
from hopqa.types import Passage

#: Tokens of the reply naming one candidate.
CHOICE_TOKENS = 24
#: Passages the choice call reads at most (the first ones given: ~1,300 tokens at 120 words each,
#: within any context window a method runs in).
CHOICE_PASSAGES = 8
CHOICE_PROMPT = (
    "{passages}\n\n"
    "Question: {question}\n"
    "The answer is one of these two: {first} / {second}. Using the passages, answer with one of them, "
    "exactly as written, nothing else.\n"
    "Answer:"
)
#: Tokens of the two date lines.
DATES_TOKENS = 64
DATES_PROMPT = (
    "{passages}\n\n"
    "Question: {question}\n"
    "Write the date the question compares for each of the two, as the passages give it (unknown if they do "
    "not), in this form:\n"
    "{first}: date\n"
    "{second}: date\n\n"
)
#: Words asking for the earlier date ("born first", "older", "released earlier") and the later
#: ("died later", "younger", "more recently"); a question with words of both asks for neither.
EARLIER_WORDS = frozenset({"first", "earlier", "earliest", "older", "oldest", "before", "sooner"})
LATER_WORDS = frozenset({"later", "latest", "last", "younger", "youngest", "newer", "newest", "recently", "recent",
                         "after"})
#: Words of comparison: a "... out of / between A and B" question holds one to ask for a choice.
COMPARING_WORDS = EARLIER_WORDS | LATER_WORDS | frozenset({
    "more", "most", "less", "least", "fewer", "fewest", "larger", "largest", "bigger", "biggest", "higher", "highest",
    "taller", "tallest", "longer", "longest", "shorter", "shortest", "smaller", "smallest", "better", "best", "worse",
    "worst"})
_MONTHS = {m: i for i, name in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                          "september", "october", "november", "december"), 1)
           for m in (name, name[:3], name[:4])}
#: A year: four digits from 1000 to 2099, not inside a longer number ("3,000", "12000").
_YEAR = re.compile(r"(?<![\d.,])(1\d{3}|20\d{2})(?!\d|,\d)")
#: A month (and its day, before or after it) right before a year: "October 6, 1988", "6 October 1988".
_MONTH_DAY = re.compile(r"(?:\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?)?\b("
                        + "|".join(sorted(_MONTHS, key=len, reverse=True))
                        + r")\b\.?(?:\s+(\d{1,2})(?:st|nd|rd|th)?)?,?\s*$", re.IGNORECASE)
#: A question word that opens a choice question's head ("Which film ...", "Who was born ...").
_WH = re.compile(r"\b(?:which|who|whom|whose|what)\b", re.IGNORECASE)
_OR = re.compile(r"\s+or\s+", re.IGNORECASE)
_AMONG = re.compile(r"\b(?:out of|between)\s+", re.IGNORECASE)
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)
#: Auxiliary verbs a question may open on: a choice ("Was A or B born first?", ``candidates``)
#: or a yes / no question ("Are both directors from the same country?", ``hopqa.methods.polar``).
AUX_VERBS = frozenset({"is", "are", "was", "were", "am", "do", "does", "did", "has", "have", "had", "can", "could",
                       "will", "would", "should", "shall", "may", "might", "must"})
#: A question opening on its verb: "Was A or B born first?", "Did A or B die later?".
_AUX = re.compile(r"^(?:" + "|".join(sorted(AUX_VERBS)) + r")\s+", re.IGNORECASE)
#: Lower-case words inside a name ("Gone with the Wind", "Lothar von Trotha"), kept when a
#: capitalised word follows them in the run.
_NAME_LINKS = frozenset({"of", "the", "a", "an", "and", "in", "on", "at", "to", "for", "with", "from", "by", "de",
                         "du", "da", "des", "del", "della", "der", "den", "van", "von", "la", "le", "y", "&"})


def _pair(parts: list[str]) -> tuple[str, str] | None:
    """The two candidates of a clause split at its one conjunction (None unless two non-empty)."""
    if len(parts) != 2:
        return None
    first, second = parts[0], parts[1].split(", ")[0]  # "Which band, A or B, had more members?"
    first, second = first.strip(" ,;:"), second.strip(" ,;:")
    return (first, second) if normalize_answer(first) and normalize_answer(second) else None


def candidates(question: str) -> tuple[str, str] | None:
    """The two candidates ``question`` asks to choose between, in its own words, or None
    (module docstring: "..., A or B?" after a wh-head, or "... out of / between A and B?")."""
    body = " ".join(question.split()).rstrip("?").strip()
    comma = body.find(", ")
    if comma > 0 and _WH.search(body[:comma]):
        pair = _pair(_OR.split(body[comma + 2:]))
        if pair:
            return pair
    among = _AMONG.search(body)
    if among and _WH.search(body[:among.start()]) and _compares(body[:among.start()]):
        return _pair(_AND.split(body[among.end():]))
    if among and among.start() == 0 and comma > 0 and _WH.search(body[comma:]) and _compares(body[comma:]):
        return _pair(_AND.split(body[among.end():comma]))  # "Between A and B, which ... first?"
    aux = _AUX.match(body)
    if aux:
        return _verb_first(body[aux.end():])
    if comma < 0 and _WH.match(body):
        return _head_then_names(body)
    return None


def name_run(text: str) -> tuple[str, str]:
    """``text`` split after its leading run of name words: words opening on a capital or a digit
    ("Ian Brennan (Footballer)", "Apollo 13"), with the lower-case words of ``_NAME_LINKS`` between
    them ("Gone with the Wind"); (name, the rest)."""
    words = text.split()
    end = 0
    for i, w in enumerate(words):
        head = w.lstrip("(\"'")
        if head[:1].isupper() or head[:1].isdigit():
            end = i + 1
        elif w.lower() not in _NAME_LINKS:
            break
    return " ".join(words[:end]), " ".join(words[end:])


def _verb_first(rest: str) -> tuple[str, str] | None:
    """The candidates of a question opening on its verb, ``rest`` being what follows the verb:
    "A or B born first" (one "or", a name after it, and a word of comparison in what follows the
    name)."""
    parts = _OR.split(rest)
    if len(parts) != 2:
        return None
    second, tail = name_run(parts[1])
    if not second or not _compares(tail):
        return None
    return _pair([parts[0], second])


def _head_then_names(body: str) -> tuple[str, str] | None:
    """The candidates of "Which band was formed first The Exies or Circus Diablo": a wh-head whose
    last word is a word of comparison, then ``A or B`` to the end, A opening on a capital."""
    parts = _OR.split(body)
    if len(parts) != 2:
        return None
    words = parts[0].split()
    last = max((i for i, w in enumerate(words) if _compares(w)), default=-1)
    if last < 0 or last + 1 >= len(words) or not words[last + 1][:1].isupper():
        return None
    first, tail = name_run(" ".join(words[last + 1:]))
    return _pair([first, parts[1]]) if first and not tail else None


def _compares(head: str) -> bool:
    """Whether ``head`` holds a word of comparison (``COMPARING_WORDS``): "Who was born first out
    of A and B?" asks to choose, "Which river forms the border between A and B?" does not."""
    return bool(_word_set(head) & COMPARING_WORDS)


def _word_set(text: str) -> set[str]:
    """The lower-cased runs of letters of ``text``, for the word lists above."""
    return set(re.findall(r"[a-z]+", text.lower()))


def date_direction(question: str, pair: tuple[str, str]) -> str | None:
    """``earlier`` or ``later``: which end of two dates ``question`` asks for, from its words
    outside the candidates (``EARLIER_WORDS``, ``LATER_WORDS``: "Which magazine was started
    first, Arthur's Magazine or First for Women?" asks for the earlier); None when it has words
    of neither or of both."""
    rest = " ".join(question.split())
    for c in pair:
        rest = rest.replace(c, " ")
    words = _word_set(rest)
    earlier, later = bool(words & EARLIER_WORDS), bool(words & LATER_WORDS)
    return None if earlier == later else "earlier" if earlier else "later"


def parse_date(text: str) -> tuple[int, int, int] | None:
    """(year, month, day) of the first year in ``text`` (``_YEAR``), with the month and day
    written right before it ("October 6, 1988", "6 October 1988"; 0 where not written); None
    without a year."""
    m = _YEAR.search(text)
    if m is None:
        return None
    md = _MONTH_DAY.search(text[max(0, m.start() - 40):m.start()])
    if md is None:
        return int(m.group(1)), 0, 0
    day = md.group(1) or md.group(3)
    return int(m.group(1)), _MONTHS[md.group(2).lower()], int(day) if day and 1 <= int(day) <= 31 else 0


def earlier_of(a: tuple[int, int, int], b: tuple[int, int, int]) -> int | None:
    """0 when ``a`` is the earlier date, 1 when ``b`` is, None when they tie at the precision both
    give (1988 against October 1988 is a tie; a missing month or day is not a 0)."""
    for x, y in zip(a, b):
        if not x or not y:
            return None
        if x != y:
            return 0 if x < y else 1
    return None


def value_lines(reply: str, pair: tuple[str, str]) -> tuple[str, str]:
    """Each candidate's line of a reply written "A: value" / "B: value" (``DATES_PROMPT``, polar's
    ``SAME_PROMPT``), the candidate's name cut off ("Man Alive (1945 Film): April 3, 1965" ->
    "April 3, 1965", so that a year in a title is not read): the line that starts with the
    candidate's name, else the line in its place; "" for a candidate without one."""
    lines = [ln.strip() for ln in reply.splitlines() if ln.strip()]
    out = []
    for i, cand in enumerate(pair):
        line = next((ln for ln in lines if ln.lower().startswith(cand.lower())), None)
        if line is not None:
            out.append(line[len(cand):].lstrip(" :-"))
        else:
            out.append(lines[i] if i < len(lines) else "")
    return out[0], out[1]


def compare_dates(llm: LLMBase, question: str, pair: tuple[str, str], passages: str, direction: str,
                  s: Any) -> str | None:
    """The candidate whose date ``direction`` picks (``compared``, module docstring): one call
    writes both dates (``DATES_PROMPT``), compared by ``earlier_of``; None (noted on ``s``) when a
    line holds no date or the dates tie."""
    gen = llm.generate(DATES_PROMPT.format(passages=passages, question=question, first=pair[0], second=pair[1]),
                       max_tokens=DATES_TOKENS, temperature=0.0, stop=["\n\n"])
    first, second = value_lines(gen.text, pair)
    dates = [parse_date(first), parse_date(second)]
    s.output(dates_reply=gen.text, lines=[first, second], dates=dates, direction=direction)
    if dates[0] is None or dates[1] is None:
        s.note("a candidate's date line holds no date: the answer is settled without comparing")
        return None
    earlier = earlier_of(dates[0], dates[1])
    if earlier is None:
        s.note("the two dates tie at the precision both give: the answer is settled without comparing")
        return None
    return pair[earlier if direction == "earlier" else 1 - earlier]


def named(answer: str, pair: tuple[str, str]) -> str | None:
    """The one candidate of ``pair`` that ``answer`` names (its normalised words are the
    candidate's, in it, or hold it: ``hopqa.methods.shorten.in_reply`` either way), or None when
    it names neither or both."""
    hits = [c for c in pair if in_reply(c, answer) or in_reply(answer, c)]
    return hits[0] if len(hits) == 1 else None


def distinct(*lists: Sequence[Passage]) -> list[Passage]:
    """The passages of ``lists`` in order, each id once (the first occurrence): what a method's
    choice step reads when it gathers passages from more than one place."""
    seen: dict[str, Passage] = {}
    for passages in lists:
        for p in passages:
            seen.setdefault(p.id, p)
    return list(seen.values())


def hold_to_choice(llm: LLMBase, question: str, answer: str, passages: Sequence[Passage],
                   max_words: int | None = None) -> str:
    """``answer`` held to the candidates of ``question`` (module docstring): unchanged when the
    question names none; else the candidate ``compared``, ``named`` or ``asked`` (at most two
    calls, each reading the first ``CHOICE_PASSAGES`` of ``passages``, each cut to
    ``max_words``), or ``answer`` when the asked reply names neither. A ``choice`` step records it
    whenever the question names candidates."""
    pair = candidates(question)
    if pair is None:
        return answer
    with step("choice", candidates=list(pair), answer=answer) as s:
        shown = list(passages)[:CHOICE_PASSAGES]
        rendered = render_passages(shown, max_words=max_words)
        direction = date_direction(question, pair)
        if direction is not None:
            s.output(passages=[p.id for p in shown])
            hit = compare_dates(llm, question, pair, rendered, direction, s)
            if hit is not None:
                s.output(kept=hit, how="compared")
                return hit
        hit = named(answer, pair)
        if hit is not None:
            s.output(kept=hit, how="named")
            return hit
        s.output(passages=[p.id for p in shown])
        gen = llm.generate(CHOICE_PROMPT.format(passages=rendered, question=question, first=pair[0], second=pair[1]),
                           max_tokens=CHOICE_TOKENS, temperature=0.0, stop=["\n"])
        reply = clean_answer(first_line_after(gen.text, 0))
        hit = named(reply, pair)
        s.output(reply=reply, kept=hit or answer, how="asked")
        if hit is None:
            s.note("the reply names neither candidate: the answer is kept")
            return answer
        return hit
