"""GenSco prompt templates (Fazili et al. 2024, Appendix B, Tables 6-9).

Tables 6 and 7 go to the generator; Tables 8 and 9 go to the scorer, whose *generation* is
never used: only the log-likelihood of a given continuation (the question) after the prompt.
Scorer prompts end with ``Question:``; the continuation scored is ``" " + question``.

Structured outputs (issue 16): ``DECOMPOSE_JSON_PROMPT`` is Table 7 with its closing cue
``Subquestion {level}:`` replaced by a request for ``SUBQUESTION_SCHEMA``; the instruction, the
two examples and the (sub-question, sub-context) history above it are the paper's text.
"""

from __future__ import annotations

from hopqa.methods.structured import json_reply, object_schema

#: The ``Context:`` of Tables 6-9: passages ``Title | text``, unnumbered, one per line
#: (``hopqa.text.render_passages`` options; each call adds its word cap).
CONTEXT_FORMAT = {"numbered": False, "separator": "\n"}

#: Table 6: the answer prompt (shots from the training files fill ``{shots}``).
ANSWER_INSTRUCTION = "Answer the question given the context. Here are a few examples:"
ANSWER_SHOT = "Question: {question}\nContext: {context}\nAnswer: {answer}"
ANSWER_PROMPT = "{instruction}\n\n{shots}\n\nQuestion: {question}\nContext: {context}\nAnswer:"
#: Zero-shot variant when no training file is available (recorded in the trace).
ANSWER_PROMPT_ZERO_SHOT = "{instruction}\n\nQuestion: {question}\nContext: {context}\nAnswer:"
ANSWER_INSTRUCTION_ZERO_SHOT = "Answer the question given the context."
#: ``answer=short`` (hopqa's remedy, not the paper's; issue 16): Table 6's instruction asking
#: for the answer alone. Given Table 6 as one chat message, Qwen2.5-1.5B answered 11 of 20
#: questions with a sentence that restates the question ("The team that ... is ...").
SHORT_ANSWER_CLAUSE = " Reply with a short answer of a few words, without explanation."

#: Table 7: the next sub-question, given the (sub-question, selected passage) pairs so far.
DECOMPOSE_INSTRUCTION = (
    "I am going to give you a question. I want to decompose it into a series of subquestions. Each subquestion "
    "should be self-contained with all the information necessary to solve it. Make sure not to decompose more "
    "than necessary or have any trivial subquestions. Do not repeat any subquestion. You'll be evaluated on the "
    "simplicity, conciseness, and correctness of your decompositions. If no more subquestion could be drawn, "
    "please generate \"<FIN></FIN>\". Here are a couple of examples:"
)
DECOMPOSE_SHOTS = (
    "Question: What are the other books from the author of \"The Good Earth\"?\n"
    "Subquestion 1: Who is the author of the book \"The Good Earth\"?\n"
    "Subcontext 1: The author of the book \"The Good Earth\" is Pearl S. Buck.\n"
    "Subquestion 2: What are the titles of books written by Pearl S. Buck other than \"The Good Earth\"?\n\n"
    "Question: Which movie came out first \"Spiderman 2\" or \"Batman Begins\"?\n"
    "Subquestion 1: When was the release date of the movie \"Spiderman 2\"?\n"
    "Subcontext 1: Spiderman 2 is a 2004 American superhero film based on the Marvel Comics character of the "
    "same name.\n"
    "Subquestion 2: When was the release date of the movie \"Batman Begins\"?"
)
DECOMPOSE_PROMPT = "{instruction}\n\n{shots}\n\nQuestion: {question}\n{history}Subquestion {level}:"
#: The next sub-question as JSON; the paper's end signal stays the value "<FIN></FIN>".
SUBQUESTION_SCHEMA = object_schema({"subquestion": {"type": "string"}})
SUBQUESTION_REPLY = json_reply({"subquestion": "[the next subquestion, or <FIN></FIN>]"})
#: Level 1: the decomposition has not started, so the instruction offers no end signal (asked
#: "or <FIN></FIN>" at level 1, Qwen2.5-1.5B ended half of its MuSiQue walks before the first
#: sub-question and answered with no passage); a ``<FIN></FIN>`` written anyway still ends it.
FIRST_SUBQUESTION_REPLY = json_reply({"subquestion": "[the first subquestion]"})
#: Table 7 asking for ``SUBQUESTION_SCHEMA`` (``reply``: ``SUBQUESTION_REPLY``) in place of the
#: cue; ``end``: the end-signal clause (``END_CLAUSE``, none at level 1).
END_CLAUSE = ', or "<FIN></FIN>" if no more subquestion could be drawn'
DECOMPOSE_JSON_PROMPT = ("{instruction}\n\n{shots}\n\nQuestion: {question}\n{history}"
                         "Write Subquestion {level}{end}. {reply}")

#: Table 8: the stopping criterion (scorer; the continuation is the multi-hop question).
STOP_PROMPT = (
    "Generate a question given its complete decomposition into subquestions along with the context containing "
    "answers to these subquestions.\nContext: {context}\nDecomposition: {decomposition}\nQuestion:"
)

#: Table 9: passage relevance (scorer; the continuation is the sub-question).
SCORE_PROMPT_HEAD = "Generate a question based on the context.\nContext:"
SCORE_PROMPT = SCORE_PROMPT_HEAD + " {context}\nQuestion:"
