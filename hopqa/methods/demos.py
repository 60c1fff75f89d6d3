"""Formatting few-shot demonstrations (``hopqa.types.Demo``) for the methods' prompts.

Methods receive their demonstrations ready (their ``demos`` argument, built by
``hopqa.datasets.few_shot_demos``); this module holds the formatting more than one method
shares: ``chain_of_thought`` (IRCoT, ITER-RETGEN), ``multi_hop`` and ``demo_bridge`` (LeapQuery,
Self-DC) and ``chain_decomposition`` (Self-DC). Self-Ask and ReAct format theirs in their own modules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from difflib import SequenceMatcher

from hopqa.types import Demo


def chain_of_thought(demo: Demo) -> str:
    """A chain of thought written from the gold steps, ending with 'So the answer is: ...'."""
    parts = []
    for s in demo.steps:
        ans = s.answer.strip().rstrip(".")
        sentence = len(ans.split()) > 4 and re.search(r"\b(is|was|are|were|has|had)\b", ans)
        parts.append(f"{ans}." if sentence else f"{s.question} {ans}.")
    return " ".join(parts) + f" So the answer is: {demo.answer}."


def multi_hop(demos: Iterable[Demo] | None) -> list[Demo]:
    """The demonstrations of two or more steps, in order: the ones that show a hop handing its
    answer to the next (a one-step demonstration shows no bridge)."""
    return [d for d in demos or () if len(d.steps) >= 2]


def demo_bridge(answer: str, next_question: str) -> str:
    """The entity a demonstration's hop answer hands to the next hop: the longest run of the
    answer's words that the next question repeats ("The director of the film Devotion is Guido
    Brignone." and "Who is the child of Guido Brignone?": "Guido Brignone"; 2WikiMultihopQA's
    answers are sentences), else the answer as it is."""
    words = answer.strip().rstrip(".").split()
    nxt = next_question.split()
    low, nlow = [w.lower().strip(".,?!'\"") for w in words], [w.lower().strip(".,?!'\"") for w in nxt]
    m = SequenceMatcher(None, low, nlow, autojunk=False).find_longest_match(0, len(low), 0, len(nlow))
    if m.size and any(w not in ("a", "an", "the", "of", "is", "was", "") for w in low[m.a:m.a + m.size]):
        return " ".join(words[m.a:m.a + m.size]).strip(".,?!")
    return answer.strip().rstrip(".")


def chain_decomposition(demo: Demo) -> list[str]:
    """A demonstration's gold steps as a chain decomposition: in each step, the entity an
    earlier step's answer hands on (``demo_bridge``) written as that step's number ("Who was
    the first president of American Psychological Association?" after "What company published
    Journal of Psychotherapy Integration?": "Who was the first president of #1?"), as a
    decomposition written before any answer is known must refer to it. A step that repeats no
    earlier answer stays as it is."""
    out: list[str] = []
    for j, current in enumerate(demo.steps):
        q = current.question
        for i, earlier in enumerate(demo.steps[:j]):
            bridge = demo_bridge(earlier.answer, q)
            found = re.search(re.escape(bridge), q, re.IGNORECASE) if bridge else None
            if found:
                q = q[:found.start()] + f"#{i + 1}" + q[found.end():]
        out.append(q)
    return out
