"""A yes / no question's answer held to yes or no (issue 33: the ``polar`` option of the seed methods).

A question that opens on its verb and names no candidates to choose between ("Are the directors
of films A and B both from the same country?", "Is X the capital of Y?", "Did A and B attend the
same school?") asks for yes or no. A small model often answers it with the value its comparison
went through ("Italian", "English", "1942"), which scores 0 whatever the comparison found.

``is_polar`` reads the question's form: it opens on an auxiliary verb
(``hopqa.methods.choice.AUX_VERBS``, the list ``choice`` reads "Was A or B born first?" with) and
has no lower-case "or" (an alternative question, "Is A or B public?", asks which; a title's "Or"
does not count). ``yes_no`` reads yes or no off the start of an answer ("Yes, both were
Italian." is yes; "True" / "False" too; "Italian" is neither). On the shipped dev subsets it
finds the 14 yes / no questions of 2WikiMultihopQA's 164 and the 17 of HotpotQA's 200, and no other.

``hold_to_polar`` then settles the answer, recorded as a ``polar`` step (``how``):

- ``compared``: a question asking whether two named things share a value ("Are A and B from the
  same country?", "Do both films A and B have directors of the same nationality?", "Does A have
  the same nationality as B?": ``same_pair`` reads the two and the value's noun off its words) has
  the model write each one's value from the passages (``SAME_PROMPT``: "A: value", "B: value"; a
  nationality is asked as a country, ``ASKED_AS``), and the two are compared here, not by the
  model: asked the question itself, Qwen2.5-1.5B said yes on 26 of 29 train yes / no questions
  (17 of them wrong), 14 of them where its own two value lines then differed. Used when both
  lines hold a value (not "unknown"); the same value (``same_value``: one's normalised words
  within the other's, "United States" and "the United States of America") is yes, else no;
- ``read``: else the answer already says yes or no: it becomes that word;
- ``asked``: else the model is asked once, with the passages, to answer yes or no
  (``POLAR_PROMPT``); a reply that says neither keeps the first answer (noted).

Not in any paper. Every parser here is linear in its input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hopqa.llm.base import LLMBase
from hopqa.methods.choice import AUX_VERBS, CHOICE_PASSAGES, candidates, hold_to_choice, name_run, value_lines
from hopqa.methods.parsing import clean_answer, first_line_after
from hopqa.methods.shorten import in_reply
from hopqa.text import normalize_answer, render_passages
from hopqa.trace import step
from hopqa.types import Passage

#: Tokens of the yes / no reply.
POLAR_TOKENS = 8
POLAR_PROMPT = (
    "{passages}\n\n"
    "Question: {question}\n"
    "Using the passages, answer the question with yes or no, nothing else.\n"
    "Answer:"
)
_FIRST_WORD = re.compile(r"[A-Za-z]+")
#: An "or" between alternatives: "Is A or B further west?" asks which, not yes or no (lower-case:
#: a title's "Or" is not one, "Kill Or Be Killed").
_OR = re.compile(r"\bor\b")
#: Tokens of the two value lines.
SAME_TOKENS = 48
SAME_PROMPT = (
    "{passages}\n\n"
    "Question: {question}\n"
    "Write the {what} of each of the two{hint}, as the passages give it (unknown if they do not), in this form:\n"
    "{first}: {what}\n"
    "{second}: {what}\n\n"
)
#: A value's noun asked as another: a nationality is written as its country ("Italy", not
#: "Italian", so that "Italian" and "Italy" are not two values).
ASKED_AS = {"nationality": "country", "nationalities": "country", "citizenship": "country"}
#: What the instruction adds for a noun (``SAME_PROMPT``'s ``hint``): a country by its name.
HINTS = {"country": " (the country's name, as France, not French)"}
#: "the same country", "same nationality": the noun after "same" is the value compared.
_SAME = re.compile(r"\bsame\s+([A-Za-z]+)")
#: Where the second of "A and B <predicate>" ends when it does not open on a name word.
_PREDICATE = re.compile(r",?\s+(?:both|from|located|situated|have|has|had|share[sd]?|of the same|in the same|"
                        r"the same|originat\w*|members?|come|came|born)\b")
_AND = re.compile(r"\s+and\s+")
#: A value line saying the passages do not give it.
_UNKNOWN = frozenset({"", "unknown", "none", "not given", "not mentioned", "not stated", "n a", "na"})
_YES = frozenset({"yes", "true", "yeah", "yep", "correct"})
_NO = frozenset({"no", "false", "nope", "incorrect", "neither"})


def is_polar(question: str) -> bool:
    """Whether ``question`` asks for yes or no: it opens on an auxiliary verb
    (``hopqa.methods.choice.AUX_VERBS``) and has no "or" (an alternative question, "Is A or B
    public?", asks which, whether or not ``choice.candidates`` finds its two)."""
    m = _FIRST_WORD.search(question)
    if m is None or question[:m.start()].strip() or m.group().lower() not in AUX_VERBS:
        return False
    return candidates(question) is None and _OR.search(question) is None


def same_pair(question: str) -> tuple[str, str, str] | None:
    """The two things a yes / no ``question`` asks to share a value, in its own words, and the
    value's noun: "Are A and B both from the same country?" -> (A, B, "country"); "Does A have the
    same nationality as B?" -> (A, B, "nationality"). None for a question that is not yes / no, has
    no "same", or has not exactly one lower-case "and" before it (a name with "and" in it would
    split wrongly). A leading "both" is dropped, and a leading category before a comma ("both
    villages, A and B, located ..." -> A); the second ends where its run of name words ends
    (``hopqa.methods.choice.name_run``), or, when it does not open on a name word ("director of
    film X from ..."), at the predicate (``_PREDICATE``)."""
    if not is_polar(question):
        return None
    body = " ".join(question.split()).rstrip("?").strip()
    same = _SAME.search(body)
    verb = _FIRST_WORD.search(body)
    if same is None or verb is None:
        return None
    what = same.group(1).lower()
    head = body[verb.end():same.start()]
    after = body[same.end():]
    if after.startswith(" as ") and not _AND.search(head):  # "Does A have the same nationality as B"
        first, second = _cut(head), after[4:]
    else:
        conj = list(_AND.finditer(head))
        if len(conj) != 1:
            return None
        first, second = head[:conj[0].start()], _second(body[verb.end() + conj[0].end():])
    first = _drop_category(first.strip(" ,"))
    first, second = first.strip(" ,;:"), second.strip(" ,;:")
    return (first, second, what) if normalize_answer(first) and normalize_answer(second) else None


def _cut(text: str) -> str:
    """``text`` up to its predicate (``_PREDICATE``): "Rafael Novoa (Actor) have the" -> "Rafael
    Novoa (Actor)"."""
    m = _PREDICATE.search(text)
    return text[:m.start()] if m else text


def _second(text: str) -> str:
    """The second thing of "A and B <predicate>", ``text`` being what follows the "and"."""
    head = text.lstrip("(\"'")
    if not (head[:1].isupper() or head[:1].isdigit()):
        return _cut(text)
    name, _ = name_run(text)
    close = text.find(")", len(name))
    if name.count("(") > name.count(")") and close >= 0:  # "Hiawatha (1913 film)": the bracket closed
        name = text[:close + 1]
    return name


def _drop_category(first: str) -> str:
    """``first`` without a leading "both", nor a category of lower-case words before a comma
    ("villages, Stanari" -> "Stanari")."""
    words = first.split()
    if words and words[0].lower() == "both":
        first = " ".join(words[1:])
    head, comma, rest = first.partition(", ")
    if comma and head and head == head.lower() and rest:
        return rest
    return first


def value_of(line: str) -> str | None:
    """A value line's value, normalised (``hopqa.text.normalize_answer``): what follows its last
    colon (a name the model wrote differently from the question's, "Wagon Train (film): United
    States"), up to its first full stop; None when it says the passages do not give it
    ("unknown", "not mentioned", empty)."""
    value = normalize_answer(line.rsplit(":", 1)[-1].split(". ")[0])
    return None if value in _UNKNOWN or value.startswith(("unknown", "not ")) else value


def same_value(a: str, b: str) -> bool:
    """Whether two normalised values are the same: one's words within the other's ("united states"
    and "united states of america"; "italy" and "rome italy")."""
    return in_reply(a, b) or in_reply(b, a)


def compare_values(llm: LLMBase, question: str, pair: tuple[str, str, str], passages: str, s: Any) -> str | None:
    """``yes`` or ``no``: whether the two of ``pair`` share the value (``compared``, module
    docstring): one call writes both values (``SAME_PROMPT``), compared by ``same_value``; None
    (noted on ``s``) when a line holds no value."""
    first, second, what = pair
    asked = ASKED_AS.get(what, what)
    gen = llm.generate(SAME_PROMPT.format(passages=passages, question=question, first=first, second=second,
                                          what=asked, hint=HINTS.get(asked, "")),
                       max_tokens=SAME_TOKENS, temperature=0.0, stop=["\n\n"])
    lines = value_lines(gen.text, (first, second))
    values = [value_of(line) for line in lines]
    s.output(values_reply=gen.text, lines=list(lines), values=values, what=asked)
    if values[0] is None or values[1] is None:
        s.note("a value line holds no value: the answer is settled without comparing")
        return None
    return "yes" if same_value(values[0], values[1]) else "no"


def yes_no(answer: str) -> str | None:
    """``yes`` or ``no`` when the first word of ``answer`` says it (``_YES``, ``_NO``: "Yes, both
    are American." is yes, "False" is no), else None."""
    m = _FIRST_WORD.search(answer)
    if m is None or answer[:m.start()].strip(" \t\n*\"'(["):
        return None
    word = m.group().lower()
    return "yes" if word in _YES else "no" if word in _NO else None


def hold_to_polar(llm: LLMBase, question: str, answer: str, passages: Sequence[Passage],
                  max_words: int | None = None) -> str:
    """``answer`` held to yes or no when ``question`` asks for it (module docstring): unchanged
    otherwise; else, for two things asked to share a value (``same_pair``), whether their two
    values written by the model are the same (``compared``, one call); else the yes or no the
    answer says (``read``) or, when it says neither, the model's yes or no (``asked``, one call),
    or ``answer`` when that reply says neither. The calls read the first ``CHOICE_PASSAGES`` of
    ``passages``, each cut to ``max_words``. A ``polar`` step records it whenever the question
    asks for yes or no."""
    if not is_polar(question):
        return answer
    with step("polar", answer=answer) as s:
        shown = list(passages)[:CHOICE_PASSAGES]
        rendered = render_passages(shown, max_words=max_words)
        pair = same_pair(question)
        if pair is not None:
            s.output(passages=[p.id for p in shown], pair=list(pair[:2]))
            said = compare_values(llm, question, pair, rendered, s)
            if said is not None:
                s.output(kept=said, how="compared")
                return said
        said = yes_no(answer)
        if said is not None:
            s.output(kept=said, how="read")
            return said
        gen = llm.generate(POLAR_PROMPT.format(passages=rendered, question=question),
                           max_tokens=POLAR_TOKENS, temperature=0.0, stop=["\n"])
        reply = clean_answer(first_line_after(gen.text, 0))
        said = yes_no(reply)
        s.output(passages=[p.id for p in shown], reply=reply, kept=said or answer, how="asked")
        if said is None:
            s.note("the reply says neither yes nor no: the answer is kept")
            return answer
        return said


def hold_answer(llm: LLMBase, question: str, answer: str, passages: Sequence[Passage], *, choice: bool,
                polar: bool, max_words: int | None = None) -> str:
    """A seed method's final ``answer`` after its ``choice`` and ``polar`` options (each off: left
    out), both reading the same ``passages``: held to a comparison's two candidates
    (``hopqa.methods.choice.hold_to_choice``), then to yes or no (``hold_to_polar``). A question
    gets at most one of the two steps: a yes / no question names no candidates."""
    if choice:
        answer = hold_to_choice(llm, question, answer, passages, max_words)
    if polar:
        answer = hold_to_polar(llm, question, answer, passages, max_words)
    return answer
