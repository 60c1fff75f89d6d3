"""LeapQuery: gap-list parsing, vote counting, the loop's stop conditions and the rerank cut on a
scripted LLM, then end to end on the embedded model in the open setting."""

from __future__ import annotations

import pytest

from hopqa.build import build_method
from hopqa.llm.base import GENERATE, STRUCTURED, GenerationRequest
from hopqa.llm.scripted import ScriptedLLM
from hopqa.methods.leapquery import parse_gaps, parse_vote
from hopqa.types import Passage
from tests.scripted_retriever import ScriptedRetriever as _ScriptedRetriever


@pytest.mark.parametrize("text, status, expected", [
    ("1. Who founded Adelphia?\n2. When did it close?", "direct", ["Who founded Adelphia?", "When did it close?"]),
    ("1) Who is Mike Park?\n2) What label did he start?", "direct", ["Who is Mike Park?", "What label did he start?"]),
    ("None", "direct", []),
    ("None. The passages answer the question.", "direct", []),
    ("- Who is Mike Park?\n* What label did he start?", "fallback", ["Who is Mike Park?", "What label did he start?"]),
    ("Sub-question 1: Who is Mike Park?\nSub-question 2: What label?", "fallback", ["Who is Mike Park?", "What label?"]),
    ("The gaps are:\nWho is Mike Park?\nWhat label did he start?", "fallback",
     ["Who is Mike Park?", "What label did he start?"]),
    ("1. **Who is Mike Park?**\n2. Who is Mike Park?\n3. A?\n4. B?\n5. C?", "direct", ["Who is Mike Park?", "A?", "B?"]),
    # a "None" first line is no gap only when no numbered or bulleted sub-question follows
    ("None.\n1. Who is Mike Park?\n2. What label did he start?", "fallback",
     ["Who is Mike Park?", "What label did he start?"]),
    ("Nothing is stated about the label.\n- What label did Mike Park start?", "fallback",
     ["What label did Mike Park start?"]),
    ("No gap in the band, but:\n1) Who is Mike Park?", "fallback", ["Who is Mike Park?"]),
    ("Nothing is missing.", "direct", []),
    ("None\nThe passages name Mike Park. Who else?", "direct", []),
    # a year or a number with a colon is no list marker; an echoed "Question: ...?" is no sub-question
    ("1999: The band formed in Berkeley.\n1. Who is Mike Park?", "direct", ["Who is Mike Park?"]),
    ("Question: What record label did the person who is part of The Bruce Lee Band start?\n"
     "1. Who is Mike Park?", "direct", ["Who is Mike Park?"]),
    ("Main question: What label?\nWho is Mike Park?", "fallback", ["Who is Mike Park?"]),
    ("1. 1.5 million people live where?\n2. Who is Mike Park?", "direct", ["1.5 million people live where?",
                                                                          "Who is Mike Park?"]),
    # near-duplicates are merged (the first kept): the same words in any order, or one word more of seven
    ("1. Who is Mike Park?\n2. Mike Park is who?\n3. What record label did Mike Park start?\n"
     "4. What record label did Mike Park start up?", "direct",
     ["Who is Mike Park?", "What record label did Mike Park start?"]),
    # ... but a question that differs in one word of ten asks something else
    ("1. What is the name of the county where Van Hook Township is located?\n"
     "2. What is the seat of the county where Van Hook Township is located?", "direct",
     ["What is the name of the county where Van Hook Township is located?",
      "What is the seat of the county where Van Hook Township is located?"]),
])
def test_parse_gaps_in_real_formats(text, status, expected):
    parsed = parse_gaps(text, limit=3)
    assert parsed.status == status and parsed.value == expected


def test_unreadable_gap_list_fails_as_no_gap():
    assert parse_gaps("I think the passages are fine overall.", 3).status == "failed"
    assert parse_gaps("", 3).status == "failed"


@pytest.mark.parametrize("text, vote", [("True", True), (" true.", True), ("False", False), ("Yes", True),
                                        ("No, it is not", False), ("False. True would be wrong", False),
                                        ("maybe", None), ("", None),
                                        # negations and an echoed "True or False:" read as meant
                                        ("Not true", False), ("not true.", False), ("It isn't aligned.", False),
                                        ("The sub-question is not aligned with the main question.", False),
                                        ("That is not really true.", False), ("Not false: it fills the gap", True),
                                        ("True or False: False", False), ("True or False? True", True),
                                        ("True/False: False", False), ("Answer True or False.\nFalse", False),
                                        ("Yes or no: no", False), ("Nothing suggests it: False", False)])
def test_parse_vote(text, vote):
    assert parse_vote(text) is vote


def test_a_vote_that_echoes_the_choice_is_a_fallback():
    from hopqa.methods.leapquery import read_vote

    assert read_vote("True or False: False").status == "fallback" and read_vote("True or False: False").value is False
    assert read_vote("Not true").status == "fallback" and read_vote("Not true").value is False
    assert read_vote("False, it is not aligned").status == "direct"


# -- a scripted world --------------------------------------------------------------------------------
Q = "What record label did the person who is part of The Bruce Lee Band start?"
P = {n: Passage(n, f"Title {n}", f"Paragraph {n} text.") for n in "ABCDEFGH"}


def ScriptedRetriever(table: dict[str, str]) -> _ScriptedRetriever:
    """The scripted retriever over this module's passages ``P``."""
    return _ScriptedRetriever(table, P)


class FixedReranker:
    """Scores by a fixed table (unknown ids 0); records every call."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores, self.calls = scores, []

    def score(self, query, passages):
        self.calls.append((query, [p.id for p in passages]))
        return [self.scores.get(p.id, 0.0) for p in passages]


def world(gap_replies: list[str], votes: dict[str, str]):
    gaps = iter(gap_replies)

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.endswith("Missing facts as questions:"):
            return next(gaps)
        if "Sub-question:" in prompt:
            sub = prompt.split("Sub-question: ", 1)[1].split("\n", 1)[0]
            return votes.get(sub, "False")
        return "Asian Man Records"

    return reply


def leap(llm, table, scores, **options):
    reranker = FixedReranker(scores)
    retriever = ScriptedRetriever(table)
    method = build_method("leapquery", llm, retriever, reranker=reranker, k=2, **options)
    return method, retriever, reranker


TABLE = {Q: "AB", "Who is Mike Park?": "CD", "What label did Mike Park start?": "EF", "Nonsense?": "GH"}
SCORES = {"A": 0.5, "B": 0.1, "C": 0.9, "D": 0.2, "E": 0.8, "F": 0.3}


def test_loop_retrieves_for_verified_gaps_and_reranks_against_the_question():
    votes = {"Who is Mike Park?": "True", "Nonsense?": "False", "What label did Mike Park start?": "True"}
    llm = ScriptedLLM(world(["1. Who is Mike Park?\n2. Nonsense?", "1. What label did Mike Park start?", "None"],
                            votes))
    method, retriever, reranker = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Asian Man Records"
    # the rejected sub-question is never searched; every rerank is against the main question
    assert retriever.queries == [Q, "Who is Mike Park?", "What label did Mike Park start?"]
    assert all(q == Q for q, _ in reranker.calls)
    assert [sorted(ids) for _, ids in reranker.calls] == [["A", "B"], ["A", "B", "C", "D"], ["A", "C", "E", "F"]]
    assert [p.id for p in ans.passages] == ["C", "E"]  # the top-k cut after the last rerank
    verify = ans.trace.root.find("verify")[0]
    tally = {t["subquestion"]: t for t in verify.outputs["tally"]}
    assert tally["Who is Mike Park?"]["true"] == 5 and tally["Nonsense?"]["true"] == 0
    assert not tally["Nonsense?"]["kept"]
    # 3 gap calls, one request of 5 samples for each of 3 sub-questions, the reader
    assert ans.usage.llm_calls == 3 + 3 + 1
    assert len([r for r in llm.requests if "Sub-question:" in r.text()]) == 15  # 5 seeded samples each
    iterations = ans.trace.root.find("iteration")
    assert len(iterations) == 3 and "no knowledge gap" in iterations[-1].events[0]["message"]


@pytest.mark.parametrize("order, read", [("rerank", "CA"), ("question-first", "AC")])
def test_read_order_question_first_reads_the_questions_own_passages_first(order, read):
    """``read_order``: the reranker picks the top-k either way (C from the sub-question, A from the
    question); ``question-first`` shows the reader the question's own passages first, in the
    retriever's order, then the sub-questions' (``rerank``, §3.4: the reranker's order)."""
    from hopqa.methods.leapquery import READ_PROMPT

    llm = ScriptedLLM(world(["1. Who is Mike Park?", "None"], {"Who is Mike Park?": "True"}))
    method, _, _ = leap(llm, TABLE, SCORES, read_order=order)
    ans = method.answer(Q)
    assert ans.error is None and "".join(p.id for p in ans.passages) == read
    reader_prompt = llm.requests[-1].text()
    passages = "\n\n".join(f"[{i}] Title {x} | Paragraph {x} text." for i, x in enumerate(read, 1))
    assert reader_prompt == READ_PROMPT.format(passages=passages, question=Q)
    (reading,) = ans.trace.root.find("read")
    assert reading.outputs.get("order") == (list(read) if order == "question-first" else None)


def test_question_first_keeps_the_retrievers_order_of_the_questions_own_passages():
    from hopqa.methods.leapquery import question_first

    first = [P["A"], P["B"], P["C"]]
    top = [P["E"], P["C"], P["A"], P["F"]]  # the reranker's order
    assert [p.id for p in question_first(top, first)] == ["A", "C", "E", "F"]
    assert question_first([], first) == [] and [p.id for p in question_first(top, [])] == ["E", "C", "A", "F"]


HOP = "Who is part of The Bruce Lee Band?"


def bridge_world(firsts: list[str], reads: dict[str, str], nexts: list[str], gap_replies: list[str],
                 votes: dict[str, str]):
    """``world`` with the ``gaps=bridge`` prompts answered: the first hops and the next questions
    in turn, a hop read from the passages by ``reads`` (by the hop's question; "None" if absent)."""
    first_replies, next_replies, base = iter(firsts), iter(nexts), world(gap_replies, votes)

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.endswith("First question:"):
            return next(first_replies)
        if prompt.endswith("Next question:"):
            return next(next_replies)
        asked = prompt.rsplit("\nQuestion: ", 1)[-1].removesuffix("\nAnswer:")
        if prompt.startswith("Answer the question using the passages") and asked != Q:
            return reads.get(asked, "None")
        return base(request)

    return reply


def test_bridge_gaps_ask_one_hop_at_a_time():
    """``gaps=bridge`` (the small-model preset): the first hop asked as a question of its own,
    read from the passages, and the question about its answer searched; the next iteration reads
    that question as its hop. A hop without an answer falls back to the missing facts."""
    from hopqa.methods.leapquery import FIRST_HOP_PROMPT, NEXT_PROMPT, READ_PROMPT, VERIFY_KNOWN_PROMPT, VERIFY_PROMPT

    votes = {"What label did Mike Park start?": "True", "Who is Mike Park?": "True"}
    llm = ScriptedLLM(bridge_world([f" {HOP}\nextra"], {HOP: " Mike Park."}, ["What label did Mike Park start?\nextra"],
                                   ["1. Who is Mike Park?"], votes))
    method, retriever, _ = leap(llm, TABLE, SCORES, preset="small-model", max_iter=2, shots=0)  # zero-shot prompts
    assert method.config.gaps == "bridge" and method.demos == ()
    ans = method.answer(Q)
    assert ans.error is None and retriever.queries == [Q, "What label did Mike Park start?", "Who is Mike Park?"]
    first, second = ans.trace.root.find("gaps")
    assert (first.outputs["hop"], first.outputs["bridge"], first.outputs["made_by"]) == (HOP, "Mike Park", "bridge")
    assert first.outputs["subquestions"] == ["What label did Mike Park start?"]
    # the second iteration's hop is the first's sub-question; no answer to it: the missing facts
    assert second.outputs["hop"] == "What label did Mike Park start?" and "made_by" not in second.outputs
    assert any("has no answer in the passages" in e["message"] for e in second.events)
    prompts = [r.text() for r in llm.requests]
    passages = "[1] Title A | Paragraph A text.\n\n[2] Title B | Paragraph B text."
    assert prompts[:3] == [FIRST_HOP_PROMPT.format(question=Q), READ_PROMPT.format(passages=passages, question=HOP),
                           NEXT_PROMPT.format(question=Q, hop=HOP, bridge="Mike Park")]
    # the vote on the bridge's question is shown the hop's answer; a missing-facts question is not
    bridge_vote = next(p for p in prompts if "Sub-question: What label did Mike Park start?" in p)
    assert bridge_vote == VERIFY_KNOWN_PROMPT.format(question=Q, subquestion="What label did Mike Park start?",
                                                     known=f'the answer to "{HOP}" is Mike Park')
    assert next(p for p in prompts if "Sub-question: Who is Mike Park?" in p) == VERIFY_PROMPT.format(
        question=Q, subquestion="Who is Mike Park?")


def test_bridge_prompts_show_demonstrations_with_shots():
    """``shots`` > 0: the first-hop and next-question prompts show the demonstrations given (each
    its question, its first gold step, the entity the step's answer names, its second step); a
    one-step demonstration is left out; ``shots=0`` keeps the zero-shot prompts."""
    from hopqa.methods.leapquery import FIRST_HOP_DEMO_PROMPT, NEXT_DEMO_PROMPT
    from hopqa.types import Demo, DemoStep

    demos = [Demo("Who is the child of the director of film Devotion?", "Lilla Brignone",
                  (DemoStep("Who is the director of the film Devotion?", "The director of the film Devotion is Guido Brignone."),
                   DemoStep("Who is the child of Guido Brignone?", "Lilla Brignone"))),
             Demo("One step?", "x", (DemoStep("One step?", "x"),)),
             Demo("When was the publisher of Journal X founded?", "1892",
                  (DemoStep("Who published Journal X?", "American Psychological Association"),
                   DemoStep("When was American Psychological Association founded?", "1892")))]
    llm = ScriptedLLM(bridge_world([HOP], {HOP: "Mike Park"}, ["What label did Mike Park start?"], ["None"],
                                   {"What label did Mike Park start?": "True"}))
    method = build_method("leapquery", llm, ScriptedRetriever(TABLE), reranker=FixedReranker(SCORES), k=2,
                          preset="small-model", shots=2, max_iter=1, demos=demos)
    assert [d.question for d in method.demos] == [demos[0].question, demos[2].question]
    ans = method.answer(Q)
    assert ans.error is None and ans.trace.root.find("gaps")[0].outputs["made_by"] == "bridge"
    prompts = [r.text() for r in llm.requests]
    assert prompts[0] == FIRST_HOP_DEMO_PROMPT.format(question=Q, demos=(
        "Question: Who is the child of the director of film Devotion?\n"
        "First question: Who is the director of the film Devotion?\n\n"
        "Question: When was the publisher of Journal X founded?\nFirst question: Who published Journal X?"))
    assert prompts[2] == NEXT_DEMO_PROMPT.format(question=Q, hop=HOP, bridge="Mike Park", demos=(
        "Question: Who is the child of the director of film Devotion?\n"
        "Earlier question: Who is the director of the film Devotion?\nIts answer: Guido Brignone\n"
        "Next question: Who is the child of Guido Brignone?\n\n"
        "Question: When was the publisher of Journal X founded?\nEarlier question: Who published Journal X?\n"
        "Its answer: American Psychological Association\n"
        "Next question: When was American Psychological Association founded?"))


def test_shots_need_demonstrations_and_build_gives_them():
    from hopqa.methods.base import MethodError

    with pytest.raises(MethodError, match="shots=2"):
        build_method("leapquery", ScriptedLLM(lambda r: ""), ScriptedRetriever(TABLE), reranker=FixedReranker(SCORES),
                     shots=2, demos=[])
    method = build_method("leapquery", ScriptedLLM(lambda r: ""), ScriptedRetriever(TABLE),
                          reranker=FixedReranker(SCORES), gaps="bridge", shots=3)  # the shipped train demonstrations
    assert len(method.demos) == 3 and all(len(d.steps) >= 2 for d in method.demos)


@pytest.mark.parametrize(("answer", "nxt", "bridge"), [
    ("The director of the film Devotion (1929 Film) is Guido Brignone.", "Who is the child of Guido Brignone?",
     "Guido Brignone"),
    ("the Church of England", "What is a term for the Church of England and churches that align with it?",
     "the Church of England"),
    ("Zimbabwe", "What is the name of the waterfall in Zimbabwe?", "Zimbabwe"),
    ("1887.", "Who was born in the year of the flood?", "1887"),  # nothing repeated: the answer as it is
])
def test_demo_bridge_is_what_the_next_step_repeats(answer, nxt, bridge):
    from hopqa.methods.leapquery import demo_bridge

    assert demo_bridge(answer, nxt) == bridge


def test_a_possessive_names_the_bridge():
    """"Who is Natalie Wood's sister?" names Natalie Wood (SQuAD's normalisation reads "woods")."""
    nxt = "What label did Natalie Wood's band start?"
    llm = ScriptedLLM(bridge_world([HOP], {HOP: "Natalie Wood"}, [nxt], ["None"], {nxt: "True"}))
    method, retriever, _ = leap(llm, {**TABLE, nxt: "EF"}, SCORES, gaps="bridge", max_iter=1)
    ans = method.answer(Q)
    assert retriever.queries == [Q, nxt] and ans.trace.root.find("gaps")[0].outputs["made_by"] == "bridge"


@pytest.mark.parametrize("read, nxt, note", [
    ("Mike Park", "Which label is it?", "does not name 'Mike Park'"),  # the next question must name the entity
    ("The Bruce Lee Band", "What label did The Bruce Lee Band start?", "is named in the question already"),
    ("unknown", "What label did Mike Park start?", "has no answer in the passages"),
])
def test_a_bridge_that_leads_nowhere_asks_for_the_missing_facts(read, nxt, note):
    llm = ScriptedLLM(bridge_world([HOP], {HOP: read}, [nxt], ["None"], {nxt: "True"}))
    method, retriever, _ = leap(llm, TABLE, SCORES, gaps="bridge")
    ans = method.answer(Q)
    assert retriever.queries == [Q] and note in ans.trace.root.find("gaps")[0].events[0]["message"]


def test_majority_vote_counts_each_sample():
    samples = iter(["True", "False", "True", "maybe", "False"])  # 2 True of 5: rejected

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.endswith("Missing facts as questions:"):
            return "1. Who is Mike Park?"
        if "Sub-question:" in prompt:
            return next(samples)
        return "x"

    method, retriever, _ = leap(ScriptedLLM(reply), TABLE, SCORES)
    ans = method.answer(Q)
    (tally,) = ans.trace.root.find("verify")[0].outputs["tally"]
    assert tally["true"] == 2 and tally["unreadable"] == 1 and not tally["kept"]
    assert retriever.queries == [Q]
    assert "no sub-question verified" in ans.trace.root.find("iteration")[0].events[0]["message"]
    # the votes are sampled: temperature and seeds
    requests = [r for r in method.llm.inner.requests if "Sub-question:" in r.text()]
    assert len(requests) == 5 and {r.seed for r in requests} == {0, 1, 2, 3, 4}
    assert all(r.temperature == 0.7 for r in requests)


def test_stops_when_the_top_k_does_not_change_and_at_max_iter():
    llm = ScriptedLLM(world(["1. Nonsense?"] * 5, {"Nonsense?": "True"}))
    method, retriever, _ = leap(llm, TABLE, {"A": 1.0, "B": 0.9})  # G and H score 0: the top-k stays A, B
    ans = method.answer(Q)
    assert len(ans.trace.root.find("iteration")) == 1
    assert "did not change" in ans.trace.root.find("iteration")[0].events[0]["message"]

    llm = ScriptedLLM(world(["1. Who is Mike Park?", "1. What label did Mike Park start?", "1. Nonsense?"],
                            {"Who is Mike Park?": "True", "What label did Mike Park start?": "True", "Nonsense?": "True"}))
    method, retriever, _ = leap(llm, TABLE, {**SCORES, "G": 2.0}, max_iter=2)
    ans = method.answer(Q)
    assert len(ans.trace.root.find("iteration")) == 2 and retriever.queries[-1] == "What label did Mike Park start?"


def test_choice_holds_a_which_of_two_answer_to_the_question_s_candidates():
    """``choice`` (in the small-model preset, issue 33): the reader's answer to a "which of A or
    B" question that names neither candidate is asked once more, over the top-k, for one of the two."""
    question = "Which label is bigger, Title C or Title B?"  # (not "Title A": an article)

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if prompt.endswith("Missing facts as questions:"):
            return "None"
        return "Title B" if "one of these two: Title C / Title B" in prompt else "Mike Park"

    for choice, expected in ((True, "Title B"), (False, "Mike Park")):
        llm = ScriptedLLM(reply)
        method, _, _ = leap(llm, {question: "CB"}, SCORES, choice=choice)
        ans = method.answer(question)
        assert ans.error is None and ans.answer == expected
        assert len(ans.trace.root.find("choice")) == choice
    assert leap(ScriptedLLM([]), TABLE, SCORES, preset="small-model")[0].config.choice


def test_gap_list_parse_is_recorded_and_unreadable_means_stop():
    method, _, _ = leap(ScriptedLLM(world(["I cannot tell."], {})), TABLE, SCORES)
    ans = method.answer(Q)
    assert ans.trace.parse_counts()["failed"] == 1 and ans.answer == "Asian Man Records"


def test_the_reader_uses_max_tokens():
    llm = ScriptedLLM(world(["None"], {}))
    method, _, _ = leap(llm, TABLE, SCORES, max_tokens=7)
    assert method.answer(Q).error is None
    (read,) = [r for r in llm.requests if r.text().startswith("Answer the question")]
    assert read.max_tokens == 7


def test_near_duplicate_subquestions_are_voted_and_searched_once():
    llm = ScriptedLLM(world(["1. What label did Mike Park start?\n2. Mike Park did start what label?\n"
                             "3. what label did mike park start", "1. What record label did Mike Park start?", "None"],
                            {"What label did Mike Park start?": "True",
                             "What record label did Mike Park start?": "True"}))
    method, retriever, _ = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    first = ans.trace.root.find("iteration")[0]
    assert [t["subquestion"] for t in first.find("verify")[0].outputs["tally"]] == ["What label did Mike Park start?"]
    # one word more than a question searched before: redundant in the next iteration
    second = ans.trace.root.find("iteration")[1]
    assert second.outputs["redundant"] == ["What record label did Mike Park start?"] and not second.find("verify")
    assert retriever.queries == [Q, "What label did Mike Park start?"]


# -- the reranker (issue 29, item 18) ------------------------------------------------------------------------
def test_the_default_reranker_is_one_named_constant_resolved_when_the_config_is_made(monkeypatch):
    """``auto``: a cross-encoder of the documented list found in the local Hugging Face cache,
    else the LLM judge; the config (so the run's config.json and every trace) holds what runs."""
    from hopqa.methods import leapquery
    from hopqa.methods.base import method_config
    from hopqa.retrieval import rerank

    assert leapquery.DEFAULT_RERANK == "auto"
    assert leapquery.LeapQueryConfig.__dataclass_fields__["rerank"].default == "auto"
    monkeypatch.setattr(rerank, "cached_cross_encoder", lambda *a, **kw: None)
    assert method_config("leapquery").rerank == "llm"
    llm = ScriptedLLM(relevance_world(["None"], {}, {"Paragraph A text.": "9", "Paragraph B text.": "2"}))
    method = build_method("leapquery", llm, ScriptedRetriever(TABLE), k=2)
    assert method.config.rerank == "llm" and method.reranker.name == "llm:scripted"
    ans = method.answer(Q)
    assert ans.trace.root.inputs["config"]["rerank"] == "llm"
    assert ans.trace.root.find("rerank")[0].inputs["reranker"] == "llm:scripted"
    assert [p.id for p in ans.passages] == ["A", "B"]
    monkeypatch.setattr(rerank, "cached_cross_encoder", lambda *a, **kw: "cross-encoder/ms-marco-MiniLM-L-6-v2")
    assert method_config("leapquery").rerank == "cross-encoder/ms-marco-MiniLM-L-6-v2"
    assert method_config("leapquery", rerank="hybrid").rerank == "hybrid"  # a choice is kept as it is


def relevance_world(gap_replies: list[str], votes: dict[str, str], relevance: dict[str, str]):
    """``world`` that also answers the LLM reranker: the score of the first text of ``relevance``
    the passage in the prompt holds (0 otherwise)."""
    inner = world(gap_replies, votes)

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if "How useful is this passage" in prompt:
            return next((score for text, score in relevance.items() if text in prompt), "0")
        return inner(request)

    return reply


# A dense-like world: the retriever ranks by the cosine of one embedder, as dense retrieval does.
SUB = "What record label did Mike Park start?"
BRIDGE = {
    "A": Passage("A", "The Bruce Lee Band", "The Bruce Lee Band is a ska punk band fronted by Mike Park."),
    "B": Passage("B", "Ska punk", "Ska punk fuses ska with punk rock."),
    "C": Passage("C", "Less Than Jake", "Less Than Jake is a ska punk band from Florida."),
    "G": Passage("G", "Asian Man Records", "Mike Park started the record label Asian Man Records in 1996."),
}
AXES = {Q: [1.0, 0.6, 0.1], SUB: [0.0, 0.1, 1.0], "The Bruce Lee Band.": [1.0, 0.5, 0.0],
        "Ska punk.": [0.6, 1.0, 0.0], "Less Than Jake.": [0.4, 1.0, 0.0], "Asian Man Records.": [0.1, 0.0, 1.0]}


class AxesEmbedder:
    """Unit vectors from ``AXES``: a text gets the vector of the first key it starts with."""

    name = "axes"

    def encode(self, texts):
        import numpy as np

        vectors = [np.array(next(v for key, v in AXES.items() if t.startswith(key)), dtype=np.float32) for t in texts]
        return np.stack([v / np.linalg.norm(v) for v in vectors])


class CosineRetriever(_ScriptedRetriever):
    """Dense-like: every query ranks all of ``BRIDGE`` by the cosine of ``AxesEmbedder``."""

    def search(self, query: str, k: int = 5) -> list[Passage]:
        from hopqa.retrieval.rerank import BiEncoderReranker, rerank

        self.queries.append(query)
        return rerank(BiEncoderReranker(AxesEmbedder()), query, list(BRIDGE.values()), k)


def bridge_llm() -> ScriptedLLM:
    """Names the bridge entity's gap once, votes it True, and (as a reranker) rates G highest."""
    scores = {"G": "10", "A": "8", "B": "3", "C": "2"}
    return ScriptedLLM(relevance_world([f"1. {SUB}", "None", "None"], {SUB: "True"},
                                       {BRIDGE[pid].text: score for pid, score in scores.items()}))


def test_a_reranker_that_ranks_as_the_retriever_cannot_let_a_subquestions_find_in(monkeypatch):
    """With dense retrieval and the bi-encoder of the same embedder (the old default), the main
    question's top-k is already the best k by the reranker's score over the whole corpus: the
    gold paragraph the sub-question found cannot enter, whatever the sub-questions are. The
    default (``auto``: a cross-encoder if cached, else the LLM judge) and ``hybrid`` can."""
    from hopqa.retrieval import rerank
    from hopqa.retrieval.rerank import BiEncoderReranker

    retriever = CosineRetriever({}, {})
    assert [p.id for p in retriever.search(Q, 2)] == ["A", "B"] and retriever.search(SUB, 1)[0].id == "G"
    retriever = CosineRetriever({}, {})
    method = build_method("leapquery", bridge_llm(), retriever, k=2, l=1, reranker=BiEncoderReranker(AxesEmbedder()))
    ans = method.answer(Q)
    assert retriever.queries == [Q, SUB]  # the sub-question was searched and found G ...
    assert [p.id for p in ans.passages] == ["A", "B"]  # ... and G could not get in
    assert "did not change" in ans.trace.root.find("iteration")[0].events[0]["message"]

    monkeypatch.setattr(rerank, "cached_cross_encoder", lambda *a, **kw: None, raising=False)  # none here
    method = build_method("leapquery", bridge_llm(), CosineRetriever({}, {}), k=2, l=1)
    assert method.config.rerank == "llm"
    ans = method.answer(Q)
    assert ans.error is None and [p.id for p in ans.passages] == ["G", "A"]  # the default lets it in


def test_the_hybrid_reranker_can_let_a_subquestions_find_in_too():
    from hopqa.retrieval.rerank import HybridReranker

    method = build_method("leapquery", bridge_llm(), CosineRetriever({}, {}), k=2, l=1,
                          reranker=HybridReranker(AxesEmbedder()))
    ans = method.answer(Q)
    assert "G" in [p.id for p in ans.passages]  # BM25 over the candidates: "record label ... start"


# -- rerank= is checked when the method is built (issue 29, item 20) --------------------------------------
@pytest.mark.parametrize("spec", ["bogus", "bi_encoder", "cross-encoder", "LLM"])
def test_an_unknown_reranker_is_refused_when_the_method_is_built(spec):
    from hopqa.methods.base import MethodError

    llm = ScriptedLLM(world(["None"], {}))
    with pytest.raises(MethodError, match=f"rerank={spec}: unknown reranker {spec!r}.*auto, bi-encoder, hybrid, llm"):
        build_method("leapquery", llm, ScriptedRetriever(TABLE), rerank=spec)
    assert llm.requests == []  # no question ran


def test_a_cross_encoder_that_is_not_on_this_machine_is_refused_when_built(monkeypatch):
    import sys
    import types

    from hopqa.methods.base import MethodError

    class Missing:
        def __init__(self, name, **kw):
            raise OSError("no such model")

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=Missing))
    with pytest.raises(MethodError, match="rerank=/no/such/cross-encoder.*not a cross-encoder model on this machine"):
        build_method("leapquery", ScriptedLLM([]), ScriptedRetriever(TABLE), rerank="/no/such/cross-encoder")


def test_redundant_subquestions_are_dropped_before_the_vote():
    """A sub-question that restates the main question, or repeats one searched in an earlier
    iteration, is not voted on or searched; only such sub-questions end the loop."""
    restated = Q.upper().rstrip("?") + " ?"  # the same after normalisation
    llm = ScriptedLLM(world([f"1. {restated}\n2. Who is Mike Park?", "1. who is Mike Park"],
                            {"Who is Mike Park?": "True"}))
    method, retriever, _ = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    assert retriever.queries == [Q, "Who is Mike Park?"]
    first, second = ans.trace.root.find("iteration")
    assert first.outputs["redundant"] == [restated]
    assert [t["subquestion"] for t in first.find("verify")[0].outputs["tally"]] == ["Who is Mike Park?"]
    assert second.outputs["redundant"] == ["who is Mike Park"] and not second.find("verify")
    assert "restates the question or one already searched" in second.events[0]["message"]


# -- structured outputs (issue 16) -----------------------------------------------------------------------
WITH_SCHEMAS = {GENERATE, STRUCTURED}


def json_world(gaps: list[str], votes: dict[str, str]):
    """Replies of a backend that keeps to the schemas (gap lists and votes as JSON)."""
    lists = iter(gaps)

    def reply(request: GenerationRequest) -> str:
        prompt = request.text()
        if '"missing_facts"' in prompt:
            assert request.schema is not None and "maxItems" in request.schema
            assert request.schema.index('"stated"') < request.schema.index('"missing_facts"')  # evidence first
            return next(lists)
        if '"aligned"' in prompt:
            assert request.schema is not None
            sub = prompt.split("Sub-question: ", 1)[1].split("\n", 1)[0]
            return votes.get(sub, '{"aligned": false}')
        assert request.schema is None  # the reader stays free text
        return "Asian Man Records"

    return reply


def test_structured_gap_list_and_votes():
    llm = ScriptedLLM(json_world(['{"missing_facts": ["Who is Mike Park?", "Nonsense?"]}', '{"missing_facts": []}'],
                                 {"Who is Mike Park?": '{"aligned": true}'}), capabilities=WITH_SCHEMAS)
    method, retriever, _ = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    assert ans.error is None and ans.answer == "Asian Man Records"
    assert retriever.queries == [Q, "Who is Mike Park?"]
    tally = {t["subquestion"]: t["true"] for t in ans.trace.root.find("verify")[0].outputs["tally"]}
    assert tally == {"Who is Mike Park?": 5, "Nonsense?": 0}
    assert "no knowledge gap" in ans.trace.root.find("iteration")[1].events[0]["message"]
    # 2 gap lists and 10 votes, all read as JSON
    assert ans.trace.parse_counts() == {"direct": 12, "fallback": 0, "failed": 0}


def test_structured_fallbacks_and_failures():
    """Free text under a schema goes to the free-text parser (fallback); JSON without the list
    is a failure, read as no gap; a JSON vote that is no boolean counts as not True."""
    llm = ScriptedLLM(json_world(["1. Who is Mike Park?"], {"Who is Mike Park?": '{"aligned": "maybe"}'}),
                      capabilities=WITH_SCHEMAS)
    method, retriever, _ = leap(llm, TABLE, SCORES)
    ans = method.answer(Q)
    counts = ans.trace.parse_counts()
    assert counts["fallback"] == 1 and counts["failed"] == 5
    assert retriever.queries == [Q]  # no vote was True
    method, _, _ = leap(ScriptedLLM(json_world(['{"gaps": ["x?"]}'], {}), capabilities=WITH_SCHEMAS), TABLE, SCORES)
    ans = method.answer(Q)
    assert ans.trace.parse_counts()["failed"] == 1
    assert "no knowledge gap" in ans.trace.root.find("iteration")[0].events[0]["message"]


def test_structured_off_sends_no_schema_and_on_needs_the_capability():
    llm = ScriptedLLM(world(["1. Who is Mike Park?", "None"], {"Who is Mike Park?": "yes"}), capabilities=WITH_SCHEMAS)
    method, retriever, _ = leap(llm, TABLE, SCORES, structured="off")
    ans = method.answer(Q)
    assert all(r.schema is None for r in llm.requests)
    assert retriever.queries == [Q, "Who is Mike Park?"]
    votes = [e for s in ans.trace.root.walk() for e in s.events if e["message"] == "parse" and e["field"] == "vote"]
    assert len(votes) == 5 and {e["status"] for e in votes} == {"fallback"}  # "yes" is not True/False
    method, _, _ = leap(ScriptedLLM(world(["None"], {})), TABLE, SCORES, structured="on")
    ans = method.answer(Q)
    assert ans.error is not None and "structured" in ans.error


def test_free_text_votes_record_how_they_parsed():
    from hopqa.methods.leapquery import read_vote

    assert read_vote("True").status == "direct" and read_vote(" false.").status == "direct"
    assert read_vote("Yes").status == "fallback" and read_vote("It is True").value is True
    assert read_vote("maybe").status == "failed"


# -- the real model ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_leapquery_end_to_end_open_setting_on_a_musique_question(smollm2, demo_index, data_dir):
    from hopqa.datasets import load_dataset

    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("leapquery", smollm2, demo_index, votes=3, max_iter=2)
    ans = method.answer(ex.question)
    assert ans.error is None, ans.error
    assert len(ans.passages) == 5 and {p.id for p in ans.passages} <= {p.id for p in demo_index.passages}
    reranks = ans.trace.root.find("rerank")
    assert reranks and all(len(r.outputs["kept"]) <= 5 for r in reranks)
    # the default judge (no cross-encoder here) read a score from every reply of the real model
    assert reranks[0].inputs["reranker"].startswith("llm:")
    assert not [e for r in reranks for e in r.events if e.get("unparsed")]
    assert all(0 <= s <= 10 for r in reranks for s in r.outputs["scores"])
    assert ans.trace.root.find("gaps") and sum(ans.trace.parse_counts().values()) >= 1
    for verify in ans.trace.root.find("verify"):
        assert all(len(t["votes"]) == 3 for t in verify.outputs["tally"])


@pytest.mark.slow
def test_leapquery_small_model_preset_end_to_end(smollm2, data_dir):
    """The preset on the real model: each gap step asks for the first hop, then reads it from the
    passages; with ``read_order=question-first`` the reader reads the question's own passages
    first, in the retriever's order."""
    from hopqa.datasets import load_dataset
    from hopqa.retrieval.pool import CandidatePool

    ex = load_dataset("musique", "dev", data_dir=data_dir, limit=1)[0]
    method = build_method("leapquery", smollm2, CandidatePool(ex.paragraphs), preset="small-model", votes=1,
                          max_iter=1, rerank="hybrid")
    assert method.config.read_order == "question-first"  # the preset's
    ans = method.answer(ex.question)
    assert ans.error is None, ans.error
    first = [p["id"] for p in ans.trace.root.find("retrieve")[0].retrievals[0]["passages"]]
    (reading,) = ans.trace.root.find("read")
    read = reading.outputs["order"]
    own = [x for x in read if x in first]
    assert read == [p.id for p in ans.passages] and own == [x for x in first if x in own]
    assert read[:len(own)] == own and len(read) == 5
    last = ans.trace.root.find("rerank")[-1].outputs["kept"]
    assert sorted(read) == sorted(last)  # the reranker's top-k, in another order
    (gaps,) = ans.trace.root.find("gaps")
    assert gaps.llm_calls[0]["prompt"].endswith("First question:") and "Examples:" in gaps.llm_calls[0]["prompt"]
    assert len(method.demos) == 4  # the preset's shots, from the shipped train decompositions
    if "hop" in gaps.outputs:  # SmolLM2 wrote a first step: it was read from the passages
        assert gaps.llm_calls[1]["prompt"].endswith(f"Question: {gaps.outputs['hop']}\nAnswer:")
        assert "bridge" in gaps.outputs
    if gaps.outputs.get("made_by") == "bridge":
        (sub,) = gaps.outputs["subquestions"]
        assert sub == gaps.outputs["bridge_question"]


def _hopqa(*args, home):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HOPQA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "hopqa.cli", *args], check=False, capture_output=True, text=True, env=env,
                          timeout=900)


def test_eval_refuses_a_bertscore_model_it_cannot_load(tmp_path, data_dir):
    r = _hopqa("eval", "--dataset", "musique", "--method", "direct", "--limit", "1", "--llm", "embedded:smollm2-135m",
               "--bertscore", "/no/such/model", "--data-dir", str(data_dir), "--out", str(tmp_path / "runs"),
               home=tmp_path / "home")
    assert r.returncode == 2 and "cannot be loaded offline" in r.stderr and "--bertscore minilm" in r.stderr


@pytest.mark.slow
def test_eval_leapquery_open_setting_with_rouge_and_bertscore(tmp_path, data_dir, hopqa_home, demo_index):
    import json

    r = _hopqa("eval", "--dataset", "musique", "--method", "leapquery", "--setting", "open", "--limit", "1",
               "--llm", "embedded:smollm2-135m", "--set", "votes=3", "--set", "max_iter=1", "--bertscore", "minilm", "--support-k", "3",
               "--no-progress", "--data-dir", str(data_dir), "--out", str(tmp_path / "runs"), home=hopqa_home)
    assert r.returncode == 0, r.stderr
    assert "| leapquery |" in r.stdout and "ROUGE-L" in r.stdout and "BERTScore" in r.stdout
    run = tmp_path / "runs" / "musique-dev-open" / "leapquery"
    line = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    assert line["status"] == "ok" and {"rouge_l", "bertscore", "support_recall"} <= set(line["metrics"])
    assert len(line["passages"]) == 5
    config = json.loads((run / "config.json").read_text())
    assert config["bertscore"] == "minilm" and config["support_k"] == 3
