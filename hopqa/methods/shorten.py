"""A short answer out of a reader's reply that answers in a sentence (issue 33).

Some papers' readers are asked to end with "The answer is xxx." (Tree of Reviews' reader);
small models often leave that sentence out, and the answer read from such a reply is its first
line: a whole sentence, often one that restates the question, which scores 0 against a short
gold answer. ``shorten`` asks the model once more, with the question and the reply, for the
shortest phrase *of the reply* that answers the question (``SHORTEN_PROMPT``), and keeps it
only if it is in the reply (compared after SQuAD normalisation): the reply's content stays
the answer, only its wording is cut, and a phrase the model made up is refused (the reply's
answer is kept, noted). ``needs_shortening`` says when: the reply had no answer marker
(``extract_answer``'s ``first-line``), or its answer runs over ``SHORT_ANSWER_WORDS`` words.

A method offers it as an option (off by default: not in any paper) and records a ``shorten``
step in the trace: the reply's answer, the model's phrase, and what was kept.
"""

from __future__ import annotations

from hopqa.llm.base import LLMBase
from hopqa.methods.parsing import clean_answer, first_line_after
from hopqa.text import normalize_answer
from hopqa.trace import step

#: An answer of more words than this is shortened (short answers of multi-hop QA are 1-5 words).
SHORT_ANSWER_WORDS = 8
#: Tokens of the short phrase.
SHORTEN_TOKENS = 24
SHORTEN_PROMPT = (
    "Question: {question}\n"
    "Reply: {reply}\n\n"
    "Copy from the reply the shortest phrase that answers the question (a name, a place, a date, a number, "
    "or yes / no), nothing else.\n"
    "Short answer:"
)


def needs_shortening(answer: str, how: str, max_words: int = SHORT_ANSWER_WORDS) -> bool:
    """Whether ``answer``, read from a reply by ``extract_answer`` (``how``), is a sentence to cut."""
    return bool(answer.strip()) and (how == "first-line" or len(answer.split()) > max_words)


def in_reply(phrase: str, reply: str) -> bool:
    """Whether ``phrase`` occurs in ``reply`` as whole normalised words (SQuAD normalisation)."""
    words, text = normalize_answer(phrase).split(), normalize_answer(reply).split()
    n = len(words)
    return bool(words) and any(text[i:i + n] == words for i in range(len(text) - n + 1))


def shorten(llm: LLMBase, question: str, reply: str, answer: str) -> str:
    """The short answer of ``reply`` to ``question`` (module docstring); ``answer`` (what was
    read from the reply) when the model's phrase is empty or not in the reply. One LLM call,
    recorded as a ``shorten`` step."""
    with step("shorten", answer=answer) as s:
        gen = llm.generate(SHORTEN_PROMPT.format(question=question, reply=" ".join(reply.split())),
                           max_tokens=SHORTEN_TOKENS, temperature=0.0, stop=["\n"])
        phrase = clean_answer(first_line_after(gen.text, 0))
        if phrase and in_reply(phrase, reply):
            s.output(phrase=phrase, kept="phrase")
            return phrase
        s.output(phrase=phrase, kept="answer")
        s.note("the short phrase is empty or not in the reply: the reply's answer is kept")
        return answer
