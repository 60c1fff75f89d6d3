"""A scripted Self-Ask world for the service's tests (API and page): two follow-ups, each answered
by reading passages, so a trace has nested steps and two hops."""

from __future__ import annotations

from hopqa.llm.scripted import ScriptedLLM


def self_ask_llm(delay: float = 0.0) -> ScriptedLLM:
    """Self-Ask with two follow-ups, each answered by reading passages: nested steps."""

    def reply(request):
        text = request.text()
        if text.startswith("Answer the question using the passages") and "county is" in text:
            return "Mountrail County"
        if text.startswith("Answer the question using the passages"):
            return "Stanley"
        if text.endswith("Intermediate answer: Stanley."):
            return "So the final answer is: Stanley."
        if text.endswith("Intermediate answer: Mountrail County."):
            return "Follow up: What is the county seat of Mountrail County?"
        return "Yes.\nFollow up: Which county is Van Hook Township in?"

    return ScriptedLLM(replies=reply, delay=delay)
