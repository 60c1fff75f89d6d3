"""Chain-of-thought prompting (Wei et al. 2022; zero-shot trigger of Kojima et al. 2022).

The model reasons step by step and ends with "So the answer is: ...", the answer format
IRCoT uses (Self-Ask's is "So the final answer is:"); ``extract_answer`` falls back to the
last marker or the first line, and the trace records which. Direct prompting with another template (``direct.OnePrompt``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hopqa.methods.base import MethodConfig, register
from hopqa.methods.direct import OnePrompt
from hopqa.trace import Step

#: Zero-shot CoT prompt with an explicit final-answer line.
COT_PROMPT = (
    "Answer the following question. Think step by step, then write the final short answer "
    'on its own line, starting with "So the answer is:".\n\n'
    "Question: {question}\nLet's think step by step."
)


@dataclass
class CoTConfig(MethodConfig):
    max_tokens: int = 256
    temperature: float = 0.0


@register("cot")
class CoT(OnePrompt):
    """Reason step by step, then answer; no retrieval."""

    Config = CoTConfig
    config: CoTConfig
    PROMPT = COT_PROMPT
    STEP = "reason"
    REPLY = "rationale"

    def check(self, s: Step, parsed_by: str) -> None:
        if not parsed_by.startswith("marker"):
            s.note("no 'So the answer is:' line; answer taken from " + parsed_by)
