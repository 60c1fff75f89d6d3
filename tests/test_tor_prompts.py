"""Tree of Reviews' prompt templates against the paper's Tables 7-13, one test per table.

The paper's text is transcribed in ``tests/fixtures/tor_tables.json`` (Appendix A, as printed;
its ``source`` and ``note`` say where from). Each test compares hopqa's template
(``hopqa.methods.tor.prompts``) with its table and states every departure hopqa makes on purpose;
the docs' Tree of Reviews page (docs/methods/tree-of-reviews.md) lists the same ones:

- ``APOSTROPHE``: the paper prints a typographic apostrophe (don’t, can’t); hopqa writes the
  ASCII one. Instructions are compared with whitespace runs collapsed (the transcription's line
  breaks are the PDF's).
- ``placeholders``: the paper's ``{INST}``, ``{DEMO}``, ``{Q}``, ``{D}`` / ``{R}`` / ``{A}`` /
  ``{E}`` are Python's named fields ``{instruction}``, ``{demos}``, ``{question}``,
  ``{documents}`` (the path's paragraphs) or ``{context}`` (the reader's pieces).
- ``layout``: the demonstrations start on the line after ``Demonstration:`` and are followed by a
  blank line, and the prompt ends with a new line, where the model's reply begins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hopqa.methods.tor import prompts

TABLES = json.loads((Path(__file__).parent / "fixtures" / "tor_tables.json").read_text(encoding="utf-8"))["tables"]
#: Departure: the paper's typographic apostrophe, written as ASCII by hopqa.
APOSTROPHE = ("\u2019", "'")
#: Departure: the paper's placeholders -> hopqa's fields, per table.
PLACEHOLDERS = {
    "review": {"{INST}": "{instruction}", "{DEMO}": "{demos}", "{Q}": "{question}", "{D}": "{documents}"},
    "mpc": {"{INST}": "{instruction}", "{DEMO}": "{demos}", "{Q}": "{question}", "{R}": "{documents}"},
    "reader": {"{INST}": "{instruction}", "{DEMO}": "{demos}", "{Q}": "{question}", "{D}": "{context}",
               "{A}": "{context}", "{E}": "{context}"},
}


def words(text: str) -> str:
    """``text`` with whitespace runs collapsed."""
    return " ".join(text.split())


def paper_instruction(table: str) -> str:
    """The table's instruction with hopqa's stated departure (the ASCII apostrophe) applied."""
    return words(TABLES[table]["instruction"].replace(*APOSTROPHE))


def paper_format(table: str, kind: str) -> str:
    """The table's Prompt Format with hopqa's stated departures: its placeholders and the layout
    (the demonstrations on their own lines, then a blank line; a final new line)."""
    text = TABLES[table]["prompt_format"]
    for paper, ours in PLACEHOLDERS[kind].items():
        text = text.replace(paper, ours)
    return text.replace("Demonstration:{demos}\n", "Demonstration:\n{demos}\n\n") + "\n"


def test_the_fixture_is_the_papers_appendix():
    assert sorted(TABLES, key=int) == ["7", "8", "9", "10", "11", "12", "13"]
    for table, entry in TABLES.items():
        assert entry["caption"].startswith(f"Table {table}: ") and entry["instruction"] and entry["prompt_format"]


def test_table_7_review_with_cot_expansion():
    assert words(prompts.REVIEW_COT) == paper_instruction("7")
    assert prompts.REVIEW_FORMAT == paper_format("7", "review")


def test_table_8_review_without_effective_expansion():
    # the paper titles this box "Instruction Format" (the others "Instruction"): a heading, not prompt text
    assert TABLES["8"]["heading"] == "Instruction Format"
    assert words(prompts.REVIEW_PLAIN) == paper_instruction("8")
    assert prompts.REVIEW_FORMAT == paper_format("8", "review")


def test_table_9_missing_paragraph_completion():
    assert words(prompts.MPC) == paper_instruction("9")
    assert prompts.MPC_FORMAT == paper_format("9", "mpc")


def test_table_10_paragraph_based_fusion():
    assert words(prompts.FUSE_PARAGRAPH) == paper_instruction("10")
    assert prompts.FUSE_PARAGRAPH_FORMAT == paper_format("10", "reader")
    assert prompts.FUSIONS["paragraph"] == (prompts.FUSE_PARAGRAPH, prompts.FUSE_PARAGRAPH_FORMAT)


def test_table_11_analysis_based_fusion():
    assert words(prompts.FUSE_ANALYSIS) == paper_instruction("11")
    assert prompts.FUSE_ANALYSIS_FORMAT == paper_format("11", "reader")
    assert prompts.FUSIONS["analysis"] == (prompts.FUSE_ANALYSIS, prompts.FUSE_ANALYSIS_FORMAT)


def test_table_12_evidence_based_fusion():
    assert words(prompts.FUSE_EVIDENCE) == paper_instruction("12")
    assert prompts.FUSE_EVIDENCE_FORMAT == paper_format("12", "reader")
    evidence = TABLES["12"]["evidence_format"].replace("{A}", "{analysis}").replace("{D}", "{documents}")
    assert prompts.EVIDENCE_FORMAT == evidence  # the placeholders are the only departure
    assert prompts.FUSIONS["evidence"] == (prompts.FUSE_EVIDENCE, prompts.FUSE_EVIDENCE_FORMAT)


def test_table_13_chain_of_reviews():
    assert words(prompts.COR) == paper_instruction("13")
    assert prompts.REVIEW_FORMAT == paper_format("13", "review")
    # what tells Table 13 from Table 7: "these documents", and no "these documents are a whole"
    assert "judge if these documents support" in prompts.COR and "are a whole" not in prompts.COR
    assert "judge if the documents support" in prompts.REVIEW_COT and "are a whole" in prompts.REVIEW_COT


def test_every_template_is_compared_with_its_table():
    """A template added to the module (an upper-case string) needs a table here, or a reason."""
    compared = {"REVIEW_COT", "REVIEW_PLAIN", "COR", "MPC", "FUSE_PARAGRAPH", "FUSE_ANALYSIS", "FUSE_EVIDENCE",
                "REVIEW_FORMAT", "MPC_FORMAT", "FUSE_PARAGRAPH_FORMAT", "FUSE_ANALYSIS_FORMAT",
                "FUSE_EVIDENCE_FORMAT", "EVIDENCE_FORMAT"}
    not_in_the_paper = {"SHORT_READ", "SHORT_READ_FORMAT"}  # reader="short", hopqa's own (issue 33)
    templates = {name for name, value in vars(prompts).items()
                 if name.isupper() and not name.startswith("_") and isinstance(value, str)}
    assert templates == compared | not_in_the_paper


@pytest.mark.parametrize("table", ["7", "8", "13"])
def test_review_demonstrations_use_the_tables_output_format(table):
    """The hand-written demonstrations (the paper's are unpublished) answer in the Output
    Format the instruction asks for: ``- Thought:`` lines only where the table has them."""
    thoughts = "- Thought:" in TABLES[table]["instruction"]
    demos = prompts.review_demos(3, thoughts)
    assert ("- Thought:" in demos) == thoughts
    assert demos.count("- Judgment: [") == 5 and demos.count("- Output: [") == 2
