"""HGOT prompt templates (Fang et al. 2024, Appendix C) and their built-in demonstrations.

The demonstrations below are the paper's own examples from Appendix C (C.1-C.5), as printed
there (C.4's third context and C.5's fourth are the paper's example *queries*, not
demonstrations). The bootstrapped demonstrations of Appendix D are ``demos.py`` and
``hopqa.bootstrap``.

The structured Plan and Predict (``hopqa.methods.structured``) send these same prompts with
``json_reply`` inserted on the line before the closing cue (``Plan:``, ``Rationale: Let's think
step by step.``), so the model writes its JSON where it would write the field; their schemas and
the functions that turn a JSON reply back into the paper's text form are at the end.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hopqa.methods.structured import json_reply, object_schema

#: The ``Context:`` of Plan (C.1) and Predict (C.5) as the demonstrations show it: passages
#: numbered for citation, one per line, ``[1] Title | text`` (``hopqa.text.render_passages``
#: options; each call adds its word cap).
CONTEXT_FORMAT = {"numbered": True, "separator": "\n"}

#: C.1 Plan.
PLAN_INSTRUCTIONS = (
    "Sketch a plan to answer the following question with the provided context. List only the essential "
    "steps which can be answered by search engines. Express each step as a standalone search question. "
    "Highlight interdependencies if any. Higher number steps can depend on lower number steps, while the "
    "reverse is not possible.\n\n---\n\nFollow the following format.\n\n"
    "Context:\n${sources that may contain relevant content. e.g., [1] Passage 1. [2] Passage 2. [3] Passage 3.}\n\n"
    "Question: ${the question to be answered}\n\n"
    "Plan:\nStep 1: ${a standalone search question. e.g., ...?} Step 2: ${a standalone search question. "
    "e.g., ...?} ... Step n: ${a standalone search question. e.g., ...?}\n"
    "Dependencies: ${interdependencies among multiple steps. e.g., Step ... depends on Step ... .}"
)
PLAN_DEMOS = [
    "Context:\n[1] Steve Masiello | (born September 2, 1977) is an American college basketball coach and a former "
    "player. He most recently served as men's head coach at Manhattan College.\n"
    "Question: Which of the Manhattan Jaspers basketball team head coach was born in September 2, 1977?\n"
    "Plan:\nStep 1: Who is the head coach of the Manhattan Jaspers basketball team? Step 2: When was the head "
    "coach born?\nDependencies: Step 2 depends on Step 1.",
    "Context:\n[1] Phil Cutchin | Phil Cutchin (September 9, 1920 - January 7, 1999) was an American football "
    "player and coach. He served as the head football coach at Oklahoma State ...\n"
    "Question: Coach Phil Cutchin served as the head football coach at Oklahoma State-University-Stillwater, "
    "which was originally known as what?\n"
    "Plan:\nStep 1: What was Oklahoma State University-Stillwater originally known as? Step 2: When did Phil "
    "Cutchin serve as the head football coach at Oklahoma State University-Stillwater?\n"
    "Dependencies: Step 2 depends on Step 1.",
]
PLAN_PROMPT = "{instructions}\n\n---\n\n{demos}\n\n---\n\nContext:\n{context}\nQuestion: {question}\nPlan:"

#: C.1 Plan without context: the official code's ``plan_template_wo_cx``, used when no passage
#: of the probe scored σ above ``plan_context_sigma``; its demonstrations show no context either.
PLAN_INSTRUCTIONS_NO_CONTEXT = (
    "Sketch a plan to answer the following question. List only the essential steps which can be answered by "
    "search engines. Express each step as a standalone search question. Highlight interdependencies if any. "
    "Higher number steps can depend on lower number steps, while the reverse is not possible.\n\n---\n\n"
    "Follow the following format.\n\n"
    "Question: ${the question to be answered}\n\n"
    "Plan:\nStep 1: ${a standalone search question. e.g., ...?} Step 2: ${a standalone search question. "
    "e.g., ...?} ... Step n: ${a standalone search question. e.g., ...?}\n"
    "Dependencies: ${interdependencies among multiple steps. e.g., Step ... depends on Step ... .}"
)
PLAN_PROMPT_NO_CONTEXT = "{instructions}\n\n---\n\n{demos}\n\n---\n\nQuestion: {question}\nPlan:"


def without_context(demo: str) -> str:
    """A Plan demonstration without its ``Context:`` field (for the prompt without context)."""
    head, sep, rest = demo.partition("Question:")
    return sep + rest if head.startswith("Context:") and sep else demo

#: C.2 Self-reflect.
REFLECT_INSTRUCTIONS = (
    "Highlight interdependencies among the steps below if any. Higher number steps can depend on lower number "
    "steps, while the reverse is not possible.\n\n---\n\nFollow the following format.\n\n"
    "Plan:\nStep 1: ${a standalone search question. e.g., ...?} Step 2: ${a standalone search question. "
    "e.g., ...?} ... Step n: ${a standalone search question. e.g., ...?}\n"
    "Dependencies: ${interdependencies among multiple steps. e.g., Step ... depends on Step ... .}"
)
REFLECT_DEMOS = [
    "Plan:\nStep 1: Who is the head coach of the Manhattan Jaspers basketball team? Step 2: When was the head "
    "coach born?\nDependencies: Step 2 depends on Step 1.",
    "Plan:\nStep 1: What was Oklahoma State University-Stillwater originally known as? Step 2: When did Phil "
    "Cutchin serve as the head football coach at Oklahoma State University-Stillwater?\n"
    "Dependencies: Step 2 depends on Step 1.",
]
REFLECT_PROMPT = "{instructions}\n\n---\n\n{demos}\n\n---\n\nPlan:\n{steps}\nDependencies:"

#: C.3 Formalize.
FORMALIZE_PROMPT = (
    "Express the dependencies in formal language by giving the descriptions below.\n\n---\n\n"
    "Follow the following format.\n\nDescriptions: ${{descriptions of dependencies}}\n"
    "Dependencies: ${{e.g., If Step 2 depends on Step 1, then write Step 1 -> Step 2; If Step 2 and Step 3 "
    "depend on Step 1, then write Step 1 -> (Step 2 and Step 3); If Step 3 depends on Step 1 and Step 2, then "
    "write (Step 1 and Step 2) -> Step 3}}\n\n---\n\nDescriptions: {descriptions}\nDependencies:"
)

#: C.4 Rewrite.
REWRITE_INSTRUCTIONS = (
    "Rewrite the last question in a standalone manner by giving the answers to previous questions. Do not "
    "consider answers that were not specified. Only show the last question after the rewrite.\n\n---\n\n"
    "Follow the following format.\n\nContext:\n${previous questions and answers}\n"
    "Rewrite: ${the last question after the rewrite}"
)
REWRITE_DEMOS = [
    "Context:\nStep 1: Who is the head coach of the Manhattan Jaspers basketball team? ANSWER: John Gallagher. "
    "Step 2: When was the head coach born?\nRewrite: When was the head coach of the Manhattan Jaspers "
    "basketball team born?",
    "Context:\nStep 1: What was Oklahoma State University-Stillwater originally known as? ANSWER: Oklahoma "
    "Agricultural and Mechanical College. Step 2: When did Phil Cutchin serve as the head football coach at "
    "Oklahoma State University-Stillwater?\nRewrite: When did Phil Cutchin serve as the head football coach at "
    "Oklahoma State University-Stillwater?",
]
REWRITE_PROMPT = "{instructions}\n\n---\n\n{demos}\n\n---\n\nContext:\n{context}\nRewrite:"

#: C.5 Predict.
PREDICT_INSTRUCTIONS = (
    "Answer questions with short factoid answers.\n\n---\n\nFollow the following format.\n\n"
    "Context:\n${sources that may contain relevant content. e.g., [1] Passage 1. [2] Passage 2. [3] Passage 3.}\n\n"
    "Question: ${the question to be answered}\n\n"
    "Rationale: Let's think step by step. ${a step-by-step deduction that identifies the correct response, "
    "which will be provided below. Every statement in the \"Rationale\" section should be attributable to the "
    "passages provided in the \"Context\" section. e.g., ...[1][2].}\n\n"
    "Answer: ${a short factoid answer, often between 1 and 5 words}"
)
#: C.5's three demonstrations as the paper prints them (seven passages each).
PREDICT_DEMOS = [
    (
        'Context:\n'
        "[1] List of Manhattan Jaspers men's basketball head coaches | Manhattan's current head coach is John"
        ' Gallagher. He was hired in March 2023, replacing RaShawn Stores, who was not promoted to the full-'
        'time position after ...\n'
        '[2] Steve Masiello | Stephen John Masiello Jr. (born September 2, 1977) is an American college '
        "basketball coach and a former player. He most recently served as men's head coach ...\n"
        '[3] Steve Masiello | (born September 2, 1977) is an American college basketball coach and a former '
        "player. He most recently served as men's head coach at Manhattan College.\n"
        "[4] Manhattan College Appoints John Gallagher to Lead Men's ... | - John Gallagher has been named "
        "the new Head Men's Basketball Coach at Manhattan College, it was announced today by Director of "
        'Athletics ...\n'
        "[5] List of Manhattan Jaspers men's basketball head coaches | Manhattan's current head coach is John"
        ' Gallagher. He was hired in March 2023, replacing RaShawn Stores, who was not promoted to the full-'
        'time position after ...\n'
        "[6] Jaspers' new coach hopes to recapture MC's past glory | Manhattan College introduced Steve "
        "Masiello, center, who will take over as the Jaspers' new men's basketball coach.\n"
        "[7] Men's Basketball Coaches | Head Coach, 718-862-7533 718-862-7533 . jgallagher06@manhattan.edu, "
        'First Year ; Assistant Coach, 718-862-7533 718-862-7533 . tim.brooks@manhattan.edu, First ...\n'
        'Question: Which of the Manhattan Jaspers basketball team head coach was born in September 2, 1977?\n'
        "Rationale: Let's think step by step. Steve Masiello was born on September 2, 1977 [2][3]. John "
        'Gallagher is the current head coach of the Manhattan Jaspers basketball team [1][4][5].\n'
        'Answer: Steve Masiello'
    ),
    (
        'Context:\n'
        '[1] Oklahoma Agricultural and Mechanical College | Oklahoma Agricultural and Mechanical College, '
        'Founded on Christmas Day in 1890 under the Morrill Act as Oklahoma Agricultural and Mechanical '
        'College, Oklahoma State University has grown through its traditions and culture to become one of '
        "America's premier land-grant universities., Oklahoma Agricultural and Mechanical College\n"
        '[2] Oklahoma State University-Stillwater | OSU was founded in 1890 under the Morrill Act. Originally'
        ' known as Oklahoma Agricultural and Mechanical College (Oklahoma A&M), it is the flagship '
        'institution ...\n'
        '[3] 1963 to 1968 | 1963 to 1968, Phil Cutchin (September 9, 1920 - January 7, 1999) was an American '
        'football player and coach. He served as the head football coach at Oklahoma State University-'
        'Stillwater from 1963 to 1968, compiling a record of 19-38-2., 1963 to 1968\n'
        '[4] Former OSU Football Coach Cutchin Dies | Cutchin was head football coach at Oklahoma State from '
        '1963 to 1968. He won only 19 games, but most all of his 40 defeats were given up ...\n'
        '[5] Phil Cutchin | Phil Cutchin (September 9, 1920 - January 7, 1999) was an American football '
        'player and coach. He served as the head football coach at Oklahoma State ...\n'
        "[6] OSU History | The college's first students attended classes in the Stillwater Congregational "
        'Church. The original campus consisted of 200 acres of prairie that were ...\n'
        '[7] Phil Cutchin | American Football Database | Fandom | He served as the head football coach at '
        'Oklahoma State University-Stillwater from 1963 to 1968, compiling a record of 19-38-2. Although he '
        'never had a winning ...\n'
        'Question: Coach Phil Cutchin served as the head football coach at Oklahoma State-University-'
        'Stillwater, which was originally known as what?\n'
        "Rationale: Let's think step by step. Oklahoma Agricultural and Mechanical College [1][2].\n"
        'Answer: Oklahoma Agricultural and Mechanical College'
    ),
    (
        'Context:\n'
        '[1] Unions file lawsuit challenging Wisconsin Act 10 | Former Republican Gov. Scott Walker signed '
        'the law in 2011 despite some of the largest protests in state history, and the law has since shaped '
        "the state's political landscape., Scott Walker\n"
        "[2] Act 10 turns 10: Four takeaways from the law that shook ... | Here's a look at how the law "
        'limiting collective bargaining for most public workers has played out.\n'
        '[3] Act 10 turns 10: Four takeaways from the law that shook ... | Act 10 ended the ability of '
        'public-sector unions to negotiate over any issues other than raises, and those raises were capped at'
        ' the rate of ...\n'
        '[4] Wisconsin Teachers Sue to Restore Collective Bargaining ... | The law, which was championed by '
        'former Republican Gov. Scott Walker, has been challenged unsuccessfully in court before. But the '
        'political context has changed: The Wisconsin Supreme Court recently flipped to liberal control for '
        'the first time in 15 years., Scott Walker\n'
        '[5] Wis. governor officially cuts collective bargaining | Scott Walker has officially taken away '
        "nearly all collective bargaining rights from the vast majority of the state's public employees. "
        'Walker ...\n'
        "[6] 10 years later, Wisconsinites are still divided over Act 10 | Former Gov. Scott Walker's "
        'landmark legislation required public employees to pay more for their pensions and health care and '
        'limited their ...\n'
        "[7] Wisconsin's Act 10 limitations on collective bargaining | With its 5-2 vote upholding the law, "
        'the Wisconsin Supreme Court gave an important nod towards the constitutionality of limits of '
        'collective bargaining rights ...\n'
        'Question: Which Wisconsin state governor oversaw a vote to significantly limit public employee '
        'collective bargaining?\n'
        "Rationale: Let's think step by step. Former Republican Governor Scott Walker oversaw a vote to "
        'significantly limit public employee collective bargaining [1][4][5][6][7].\n'
        'Answer: Scott Walker'
    ),
]
PREDICT_PROMPT = "{instructions}\n\n---\n\n{demos}\n\n---\n\nContext:\n{context}\nQuestion: {question}\nRationale: Let's think step by step."
#: ``step_answers`` (not in the paper): INFER's context ends with the plan's steps and their
#: answers, one line each, after the numbered passages.
STEP_ANSWERS_HEADER = "Answers found for the steps of the plan:"
STEP_ANSWER_LINE = "- {question} {answer}"


# -- structured Plan and Predict ----------------------------------------------------------------------
#: Room for the JSON wrapper (keys, quotes, brackets) on top of a step's free-text ``max_tokens``.
JSON_EXTRA_TOKENS = 64
#: The cues the Plan and Predict prompts end with; the JSON instruction goes on the line before.
PLAN_CUE = "Plan:"
PREDICT_CUE = "Rationale: Let's think step by step."


def plan_schema(max_steps: int) -> dict[str, Any]:
    """C.1 Plan as JSON: at most ``max_steps`` steps, each a standalone search question and the
    numbers of the (lower) steps it depends on — the paper's ``Plan:`` and ``Dependencies:``
    fields in one object (``render_plan`` writes it back as that text)."""
    step = object_schema({"question": {"type": "string"},
                          "depends_on": {"type": "array", "items": {"type": "integer"}, "maxItems": max_steps}})
    return object_schema({"steps": {"type": "array", "items": step, "maxItems": max_steps}})


PLAN_JSON_EXAMPLE = {"steps": [{"question": "Step 1 as a standalone search question?", "depends_on": []},
                               {"question": "Step 2 as a standalone search question?", "depends_on": [1]}]}

#: C.5 Predict as JSON: the rationale's statements, each with the numbers of the passages it cites,
#: before the answer (written last, as in the paper's format). ``render_rationale`` writes the
#: statements back as the paper's rationale, markers ``[i]`` before each statement's period.
PREDICT_MAX_STATEMENTS = 6
PREDICT_MAX_CITATIONS = 7
PREDICT_SCHEMA = object_schema({
    "statements": {"type": "array", "maxItems": PREDICT_MAX_STATEMENTS, "items": object_schema({
        "text": {"type": "string"},
        "citations": {"type": "array", "items": {"type": "integer"}, "maxItems": PREDICT_MAX_CITATIONS}})},
    "answer": {"type": "string"},
})
PREDICT_JSON_EXAMPLE = {
    "statements": [{"text": "A statement of the step-by-step deduction, attributable to the passages it cites",
                    "citations": [1, 2]}],
    "answer": "a short factoid answer, often between 1 and 5 words",
}


def json_prompt(prompt: str, cue: str, example: Mapping[str, Any]) -> str:
    """``prompt`` (ending with ``cue``) with ``json_reply(example)`` on the line before the cue."""
    if not prompt.endswith(cue):
        raise ValueError(f"the prompt does not end with {cue!r}")
    return prompt[: len(prompt) - len(cue)] + json_reply(example) + "\n" + cue


def render_plan(questions: Sequence[str], depends_on: Sequence[Sequence[int]]) -> tuple[str, str]:
    """A JSON plan in the paper's text form: ``(reply, dependencies)``, the reply being
    ``Step 1: ... Step 2: ...`` and ``Dependencies: Step 2 depends on Step 1.`` (one sentence per
    step with dependencies, "Step 3 depends on Step 1 and Step 2."; ``None`` when there is none),
    as C.1's demonstrations write them; ``("", "")`` for an empty plan. Numbers are written as
    given: ``parse_dependencies`` drops (and notes) those naming a missing or a later step, as it
    does for free text."""
    if not questions:
        return "", ""
    listing = " ".join(f"Step {i}: {q}" for i, q in enumerate(questions, 1))
    sentences = [f"Step {i} depends on " + " and ".join(f"Step {d}" for d in deps) + "."
                 for i, deps in enumerate(depends_on, 1) if deps]
    dependencies = " ".join(sentences) or "None"
    return f"{listing}\nDependencies: {dependencies}", dependencies


_MARKER = re.compile(r"\[(\d{1,6})\]")
_ANY_MARKER = re.compile(r"\[\d+\]")


def markers(text: str) -> list[int]:
    """The citation markers ``[i]`` a statement's text carries itself (numbers of at most six
    digits), in order."""
    return [int(c) for c in _MARKER.findall(text)]


def render_statement(text: str, citations: Sequence[int]) -> str:
    """One JSON statement in the paper's rationale form: its text without markers, then
    ``citations`` as ``[i]`` markers before its closing period, ``"... [1][3]."`` (``""`` for an
    empty text)."""
    text = " ".join(_ANY_MARKER.sub(" ", text).split()).rstrip(" .")
    if not text:
        return ""
    return text + (" " + "".join(f"[{c}]" for c in citations) if citations else "") + "."
