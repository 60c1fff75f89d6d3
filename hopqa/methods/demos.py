"""Formatting few-shot demonstrations (``hopqa.types.Demo``) for the methods' prompts.

Methods receive their demonstrations ready (their ``demos`` argument, built by
``hopqa.datasets.few_shot_demos``); this module holds the formatting more than one method
shares: ``chain_of_thought`` (IRCoT, ITER-RETGEN). Self-Ask and ReAct format theirs in their
own modules.
"""

from __future__ import annotations

import re

from hopqa.types import Demo


def chain_of_thought(demo: Demo) -> str:
    """A chain of thought written from the gold steps, ending with 'So the answer is: ...'."""
    parts = []
    for s in demo.steps:
        ans = s.answer.strip().rstrip(".")
        sentence = len(ans.split()) > 4 and re.search(r"\b(is|was|are|were|has|had)\b", ans)
        parts.append(f"{ans}." if sentence else f"{s.question} {ans}.")
    return " ".join(parts) + f" So the answer is: {demo.answer}."
