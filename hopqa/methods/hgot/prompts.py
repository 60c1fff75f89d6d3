"""HGOT prompt templates (Fang et al. 2024, Appendix C) and their built-in demonstrations.

The demonstrations below are the paper's own examples from Appendix C (C.1-C.5). The
bootstrapped demonstrations of Appendix D (DSP-style, from training data) are not built yet;
see the HGOT module docstring.
"""

from __future__ import annotations

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
    "Context:\nStep 1: What is the name of the firm where Mark Walter is the CEO? ANSWER: Guggenheim Partners. "
    "Step 2: What was Todd Boehly's former position at the firm where Mark Walter is the CEO?\n"
    "Rewrite: What was Todd Boehly's former position at Guggenheim Partners?",
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
PREDICT_DEMOS = [
    "Context:\n[1] List of Manhattan Jaspers men's basketball head coaches | Manhattan's current head coach is John "
    "Gallagher. He was hired in March 2023.\n[2] Steve Masiello | Stephen John Masiello Jr. (born September 2, "
    "1977) is an American college basketball coach and a former player.\n"
    "Question: Which of the Manhattan Jaspers basketball team head coach was born in September 2, 1977?\n"
    "Rationale: Let's think step by step. Steve Masiello was born on September 2, 1977 [2]. John Gallagher is the "
    "current head coach of the Manhattan Jaspers basketball team [1].\nAnswer: Steve Masiello",
    "Context:\n[1] Oklahoma State University-Stillwater | OSU was founded in 1890 under the Morrill Act. "
    "Originally known as Oklahoma Agricultural and Mechanical College (Oklahoma A&M), it is the flagship "
    "institution.\n[2] Phil Cutchin | Phil Cutchin was an American football player and coach. He served as the "
    "head football coach at Oklahoma State.\n"
    "Question: Coach Phil Cutchin served as the head football coach at Oklahoma State-University-Stillwater, "
    "which was originally known as what?\n"
    "Rationale: Let's think step by step. Oklahoma Agricultural and Mechanical College [1].\n"
    "Answer: Oklahoma Agricultural and Mechanical College",
]
PREDICT_PROMPT = "{instructions}\n\n---\n\n{demos}\n\n---\n\nContext:\n{context}\nQuestion: {question}\nRationale: Let's think step by step."
