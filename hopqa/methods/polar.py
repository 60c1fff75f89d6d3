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

- ``read``: the answer already says yes or no: it becomes that word;
- ``asked``: else the model is asked once, with the passages, to answer yes or no
  (``POLAR_PROMPT``); a reply that says neither keeps the first answer (noted).

Not in any paper. Every parser here is linear in its input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hopqa.llm.base import LLMBase
from hopqa.methods.choice import AUX_VERBS, CHOICE_PASSAGES, candidates, hold_to_choice
from hopqa.methods.parsing import clean_answer, first_line_after
from hopqa.text import render_passages
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
    otherwise; else the yes or no it says (``read``) or, when it says neither, the model's yes or no
    reading the first ``CHOICE_PASSAGES`` of ``passages``, each cut to ``max_words`` (``asked``,
    one call), or ``answer`` when that reply says neither. A ``polar`` step records it whenever the
    question asks for yes or no."""
    if not is_polar(question):
        return answer
    with step("polar", answer=answer) as s:
        said = yes_no(answer)
        if said is not None:
            s.output(kept=said, how="read")
            return said
        shown = list(passages)[:CHOICE_PASSAGES]
        gen = llm.generate(POLAR_PROMPT.format(passages=render_passages(shown, max_words=max_words),
                                               question=question),
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
