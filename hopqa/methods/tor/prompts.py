"""Tree of Reviews prompt templates (Jiapeng Li et al. 2024, Appendix A, Tables 7-13).

The instructions are the paper's text as printed (its wording and slips kept; the apostrophes
ASCII); the prompt formats are its ``Prompt Format`` lines, with named fields for its
placeholders and the demonstrations on lines of their own. ``tests/test_tor_prompts.py``
compares every template with its table (transcribed in ``tests/fixtures/tor_tables.json``).
Table 10's prompt also serves the acceptance call that writes an accepted path's brief
analysis (§3.2, which prints no prompt of its own: ``hopqa.methods.tor.method``).

The paper's 3-shot demonstrations were "manually annotated" from each dataset's training set
and are not published: ours are hand-written here,
on general-knowledge questions that are in none of the shipped benchmark subsets, one per
outcome a review can have (irrelevant; relevant but unsupported, with a query; supported, with
an answer). ``shots`` (0-3) chooses how many a prompt shows.

- ``REVIEW_COT``   Table 7: paragraphs review with CoT expansion (a Thought before each judgment)
- ``REVIEW_PLAIN`` Table 8: paragraphs review without effective expansion (judgments only)
- ``MPC``          Table 9: missing-paragraph completion (the ``[INFO]`` becomes the query)
- ``FUSE_PARAGRAPH`` / ``FUSE_ANALYSIS`` / ``FUSE_EVIDENCE``  Tables 10 / 11 / 12: the reader
- ``COR``          Table 13: the chain-of-reviews baseline's review (Table 7 with "judge if these
                   documents support" and without "these documents are a whole")

Documents are shown as ``[i] Title | text`` (``hopqa.text.render_passages``, one per line).
"""

from __future__ import annotations

from dataclasses import dataclass

_REVIEW_INTRO = (
    "I will give you a query and few of documents. Your ultimate task is to judge if {the} documents support "
    "answering the question. However, you need to think step by step. Follow these steps to answer question."
)
_WHOLE = (
    " The most important thing you must aware, these documents are a whole. So in later steps, if you are asked "
    "to judge something, please judge with all the documents."
)
_STEP1 = (
    "Step 1\nYou need to judge if the documents are relevant to the question. Please pay attention that this is a "
    "multi-hop QA task, so if these document contain any useful information which can help you get closer to the "
    "final answer, you have to output [RELEVANT], only if those documents don't contain any useful information "
    "you have to output [IRRELEVANT].\nOutput:\n"
)
_STEP1_THOUGHT = "- Thought: why you think these documents are relevant to question or not.\n"
_STEP1_JUDGMENT = (
    "- Judgment: Please pay attention that this is a multi-hop QA task, so if these document contain any useful "
    "information which can help you get closer to the final answer, you have to output [RELEVANT], only if those "
    "documents don't contain any useful information you have to output [IRRELEVANT]. [RELEVANT] if the documents "
    "are relevant to the question, otherwise [IRRELEVANT].\nOutput Format:\n"
)
_STEP2 = (
    "Step 2\nYou need to judge if the documents contain enough information to answer the question. Please pay "
    "attention that this is a multi-hop QA task, so please double-check that you have all the information you "
    "need to answer the question. Whenever you find that you miss any information to answer the question you "
    "need to output [UNSUPPORTED]. Only if you get all the information supported to answer the question, you "
    "have to output [SUPPORTED].\nOutput: "
)
_STEP2_THOUGHT = (
    "- Thought: If you are confident that you have all the information to answer the question, briefly write "
    "the reasoning path. Otherwise, list what kind of information is important to answer this question.\n"
)
_STEP3 = (
    "Step 3\nIf you output [SUPPORTED] in step2 ,you need to answer the question with these documents, otherwise "
    "you need to think what kind of extra information you need to answer the question and output new query. "
    "Output:\n"
)
_STEP3_THOUGHT = "- Thought: if you can answer the question according to step2. If you can't, think what extra information you need.\n"


def _review_instruction(thoughts: bool, whole: bool) -> str:
    """Tables 7 (``thoughts``), 8 (without) and 13 (``thoughts``, not ``whole``: its first
    sentence says "these documents" where Tables 7 and 8 say "the documents")."""
    few = "- Thought: A few words for judgment.\n" if thoughts else ""
    return (
        _REVIEW_INTRO.format(the="the" if whole else "these")
        + (_WHOLE if whole else "")
        + "\n"
        + _STEP1
        + (_STEP1_THOUGHT if thoughts else "")
        + _STEP1_JUDGMENT
        + few
        + "- Judgment: [RELEVANT] or [IRRELEVANT]\n"
        + _STEP2
        + (_STEP2_THOUGHT if thoughts else "")
        + "- Judgment: [SUPPORTED] if contain enough information, otherwise [UNSUPPORTED].\n"
        + "Output Format: "
        + few
        + "- Judgment: [SUPPORTED] or [UNSUPPORTED],\n"
        + _STEP3
        + (_STEP3_THOUGHT if thoughts else "")
        + "- Output: [ANSWER] if you can answer the question, otherwise [QUERY]\nOutput Format:\n"
        + ("- Thought: A few words for thought.\n" if thoughts else "")
        + "- Output: A special token ([ANSWER] or [QUERY]) follow with your answer or new query."
    )


#: Tables 7, 8 and 13: instruction, demonstrations, question, the path's documents.
REVIEW_FORMAT = "Instruction:{instruction}\nDemonstration:\n{demos}\n\nQuestion:{question}\nDocuments: {documents}\n"
REVIEW_COT = _review_instruction(thoughts=True, whole=True)
REVIEW_PLAIN = _review_instruction(thoughts=False, whole=True)
COR = _review_instruction(thoughts=True, whole=False)

#: Table 9: missing-paragraph completion.
MPC = (
    "I will give you a question and few of references, your ultimate task is answer the question according to "
    "these references. However these references lack of some important information to answer the question. So "
    "you should follow these two steps to answer the question.\n"
    "Step 1\nComplete the reference information In this step you need to generate the missing information based "
    "on your knowledge so that you can answer the question correctly.\nOutput:\n"
    "- Thought: To be effective generate missing information, you must analyze what information is currently "
    "missing, based on the question and references.\n"
    "- Information: A special token ([INFO]) follow with the missing information you want to supply.\n"
    "Step 2\nAnswer generation You need to answer the question based on references I gave you and the "
    "information you supplied by yourself.\nOutput:\n"
    "- Answer:A special token ([ANSWER]) follow with the answer to my question."
)
MPC_FORMAT = "Instruction:{instruction}\nDemonstration:\n{demos}\n\nQuestion:{question}\nReferences: {documents}\n"

#: Tables 10-12: the reader over the evidence pool.
FUSE_PARAGRAPH = (
    "Your task is to answer my questions in a few words based on the relevant documents I have provided .If "
    "documents not provide enough information to answer the question, answer it by yourself. Your response can "
    'contain several sentences, but The last sentence must include "The answer is xxx.'
)
FUSE_ANALYSIS = (
    "Your task is to answer my questions based on some assertions that I provide related to the problem. There "
    "may be some conflicts among these assertions, so use all the assertions and your own knowledge to make a "
    'judgment. Your response can contain several sentences, but The last sentence must include "The answer is '
    "xxx."
)
FUSE_EVIDENCE = (
    "Your task is to answer my questions based on a set of evidence that I provide. Each piece of evidence "
    "includes an assertion related to the question and several reference documents supporting the assertion. "
    "There may be some conflicts among the assertions in the evidence, so use all the evidence, supporting "
    "reference documents, and your own knowledge to make a judgment. Your response can contain several "
    'sentences, but The last sentence must include "The answer is xxx.'
)
FUSE_PARAGRAPH_FORMAT = "Instruct:{instruction}\nDemonstration:\n{demos}\n\nDocuments:{context}\nQuestion:{question}\n"
FUSE_ANALYSIS_FORMAT = "Instruct:{instruction}\nDemonstration:\n{demos}\n\nAssertions:{context}\nQuestion:{question}\n"
FUSE_EVIDENCE_FORMAT = "Instruct:{instruction}\nDemonstration:\n{demos}\n\nEvidence:{context}\nQuestion:{question}\n"
#: Table 12's Evidence Format: one piece of evidence.
EVIDENCE_FORMAT = "Assertions:{analysis}\nDocuments:{documents}"
FUSIONS = {
    "paragraph": (FUSE_PARAGRAPH, FUSE_PARAGRAPH_FORMAT),
    "analysis": (FUSE_ANALYSIS, FUSE_ANALYSIS_FORMAT),
    "evidence": (FUSE_EVIDENCE, FUSE_EVIDENCE_FORMAT),
}

#: Not in the paper (``reader="short"``, issue 33): the same context read zero-shot for a short
#: answer, without a chain of thought (Retrieve-then-Read's wording, hopqa's own), for small
#: models whose reasoning before "The answer is" goes wrong where a direct answer does not.
SHORT_READ = "Answer the question using the {what} below. Reply with a short answer of a few words, without explanation."
SHORT_READ_FORMAT = "{instruction}\n\n{label}:\n{context}\n\nQuestion: {question}\nAnswer:"
SHORT_FUSIONS = {
    "paragraph": (SHORT_READ.format(what="documents"), SHORT_READ_FORMAT.replace("{label}", "Documents")),
    "analysis": (SHORT_READ.format(what="assertions (they may conflict)"),
                 SHORT_READ_FORMAT.replace("{label}", "Assertions")),
    "evidence": (SHORT_READ.format(what="evidence (each piece an assertion and the documents behind it; the "
                                        "assertions may conflict)"),
                 SHORT_READ_FORMAT.replace("{label}", "Evidence")),
}


# -- demonstrations ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ReviewDemo:
    """One hand-written review: the question, its documents (``[i] Title | text`` lines) and the
    three steps (thoughts are shown by Tables 7 and 13, left out by Table 8)."""

    question: str
    documents: str
    relevance_thought: str
    relevant: bool
    support_thought: str = ""
    supported: bool = False
    output_thought: str = ""
    output: str = ""  # "[ANSWER] ..." or "[QUERY] ..."; empty after [IRRELEVANT]

    def render(self, thoughts: bool) -> str:
        lines = [f"Question:{self.question}", f"Documents: {self.documents}", "Step 1"]
        if thoughts:
            lines.append(f"- Thought: {self.relevance_thought}")
        lines.append("- Judgment: " + ("[RELEVANT]" if self.relevant else "[IRRELEVANT]"))
        if self.relevant:
            lines.append("Step 2")
            if thoughts:
                lines.append(f"- Thought: {self.support_thought}")
            lines.append("- Judgment: " + ("[SUPPORTED]" if self.supported else "[UNSUPPORTED]"))
            lines.append("Step 3")
            if thoughts:
                lines.append(f"- Thought: {self.output_thought}")
            lines.append(f"- Output: {self.output}")
        return "\n".join(lines)


_JAWS = "[1] Jaws (film) | Jaws is a 1975 American thriller film directed by Steven Spielberg, based on the 1974 novel by Peter Benchley."
_SPIELBERG = (
    "[2] Steven Spielberg | Steven Allan Spielberg (born December 18, 1946) is an American filmmaker. He was "
    "born in Cincinnati, Ohio."
)
_OLD_MAN = (
    "[1] The Old Man and the Sea | The Old Man and the Sea is a 1952 novella by the American author Ernest "
    "Hemingway, about an aging Cuban fisherman."
)
_MERMAID = (
    "[1] The Little Mermaid | The Little Mermaid is a fairy tale by the Danish author Hans Christian Andersen, "
    "first published in 1837."
)
_LITTLE_PRINCE = (
    "[1] The Little Prince | The Little Prince is a novella written and illustrated by the French "
    "aviator and writer Antoine de Saint-Exupery, first published in 1943."
)
_LYON = (
    "[2] Lyon | Lyon is a city in France at the confluence of the rivers Rhone and Saone. The writer Antoine de "
    "Saint-Exupery was born there in 1900."
)

REVIEW_DEMOS: tuple[ReviewDemo, ...] = (
    ReviewDemo(
        question="Which river flows through the birthplace of the author of The Little Prince?",
        documents=_MERMAID,
        relevance_thought="The document is about The Little Mermaid by Hans Christian Andersen, a different work "
        "and author; it says nothing about The Little Prince, its author or a river.",
        relevant=False,
    ),
    ReviewDemo(
        question="In which city was the author of The Old Man and the Sea born?",
        documents=_OLD_MAN,
        relevance_thought="The document names the author of The Old Man and the Sea, which is the first hop.",
        relevant=True,
        support_thought="The author is Ernest Hemingway, but the document does not say where Hemingway was born.",
        supported=False,
        output_thought="I need the birthplace of Ernest Hemingway.",
        output="[QUERY] Where was Ernest Hemingway born?",
    ),
    ReviewDemo(
        question="What is the nationality of the director of the film Jaws?",
        documents=_JAWS + "\n" + _SPIELBERG,
        relevance_thought="The documents name the director of Jaws and describe him.",
        relevant=True,
        support_thought="Jaws was directed by Steven Spielberg, and Steven Spielberg is an American filmmaker.",
        supported=True,
        output_thought="The documents give the director and his nationality.",
        output="[ANSWER] American",
    ),
)


@dataclass(frozen=True)
class MpcDemo:
    """One missing-paragraph completion (Table 9)."""

    question: str
    documents: str
    thought: str
    info: str
    answer: str

    def render(self) -> str:
        return (
            f"Question:{self.question}\nReferences: {self.documents}\n- Thought: {self.thought}\n"
            f"- Information: [INFO] {self.info}\n- Answer: [ANSWER] {self.answer}"
        )


MPC_DEMOS: tuple[MpcDemo, ...] = (
    MpcDemo(
        question="In which city was the author of The Old Man and the Sea born?",
        documents=_OLD_MAN,
        thought="The reference gives the author, Ernest Hemingway, but not his birthplace.",
        info="Ernest Hemingway was born on July 21, 1899, in Oak Park, Illinois.",
        answer="Oak Park, Illinois",
    ),
    MpcDemo(
        question="Which river flows through the birthplace of the author of The Little Prince?",
        documents=_LITTLE_PRINCE,
        thought="The reference gives the author, Antoine de Saint-Exupery; his birthplace and its river are missing.",
        info="Antoine de Saint-Exupery was born in Lyon, France. Lyon lies where the Rhone meets the Saone.",
        answer="Rhone",
    ),
    MpcDemo(
        question="What is the nationality of the director of the film Jaws?",
        documents=_JAWS,
        thought="The reference gives the director, Steven Spielberg, but not his nationality.",
        info="Steven Spielberg is an American filmmaker born in Cincinnati, Ohio.",
        answer="American",
    ),
)


@dataclass(frozen=True)
class FusionDemo:
    """One reader demonstration (Tables 10-12): its analysis, documents and response."""

    question: str
    analysis: str
    documents: str
    response: str

    def render(self, fusion: str) -> str:
        if fusion == "paragraph":
            context = f"Documents:{self.documents}"
        elif fusion == "analysis":
            context = f"Assertions:{self.analysis}"
        else:
            context = "Evidence:" + EVIDENCE_FORMAT.format(analysis=self.analysis, documents=self.documents)
        return f"{context}\nQuestion:{self.question}\n{self.response}"


FUSION_DEMOS: tuple[FusionDemo, ...] = (
    FusionDemo(
        question="What is the nationality of the director of the film Jaws?",
        analysis="Jaws was directed by Steven Spielberg, who is an American filmmaker. American",
        documents=_JAWS + "\n" + _SPIELBERG,
        response="Jaws was directed by Steven Spielberg, an American filmmaker. The answer is American.",
    ),
    FusionDemo(
        question="In which city was the author of The Old Man and the Sea born?",
        analysis="The Old Man and the Sea was written by Ernest Hemingway, who was born in Oak Park. Oak Park, Illinois",
        documents=_OLD_MAN + "\n[2] Ernest Hemingway | Ernest Miller Hemingway (1899-1961) was an American novelist, "
        "born in Oak Park, Illinois.",
        response="The novella is by Ernest Hemingway, who was born in Oak Park, Illinois. The answer is Oak Park, Illinois.",
    ),
    FusionDemo(
        question="Which river flows through the birthplace of the author of The Little Prince?",
        analysis="The Little Prince is by Antoine de Saint-Exupery, who was born in Lyon, on the Rhone. Rhone",
        documents=_LITTLE_PRINCE + "\n" + _LYON,
        response="The Little Prince was written by Antoine de Saint-Exupery, who was born in Lyon, which lies on "
        "the Rhone. The answer is Rhone.",
    ),
)


def review_demos(shots: int, thoughts: bool) -> str:
    """The first ``shots`` review demonstrations (Tables 7, 8, 13), blank-line separated."""
    return "\n\n".join(d.render(thoughts) for d in REVIEW_DEMOS[:shots])


def mpc_demos(shots: int) -> str:
    return "\n\n".join(d.render() for d in MPC_DEMOS[:shots])


def fusion_demos(shots: int, fusion: str) -> str:
    return "\n\n".join(d.render(fusion) for d in FUSION_DEMOS[:shots])
