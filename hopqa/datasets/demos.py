"""Few-shot demonstrations built from the shipped *train* files (never from dev).

A ``Demo`` (``hopqa.types``) is a multi-hop question with its gold decomposition: the
sub-questions in order, each with its answer and the supporting paragraph, and the final
answer. Sources: MuSiQue train (``question_decomposition`` with ``paragraph_support_idx``;
relation-style steps such as ``"Hello Love >> performer"`` become ``"What is the performer of
Hello Love?"`` and ``#1`` references are replaced by the earlier answers) and 2WikiMultihopQA
train (``qa_pairs``, with the gold paragraphs of ``supporting_facts``). Demonstrations
alternate between the sources and are chosen deterministically (the first ones of 2-3 hops
whose steps are all natural questions after conversion), so a prompt is the same on every run.

Demonstrations are an input of a method (its ``demos`` argument): whoever builds the method
(``hopqa.build``) calls ``few_shot_demos(config.shots)`` once, and each method formats them in
its own way (Self-Ask's follow-ups, ReAct's Thought/Action/Observation, IRCoT's and
ITER-RETGEN's chains of thought).

The demonstrations are pinned: they are always read from the train subsets shipped with hopqa
(``shipped_data_dir()``), never from ``--data-dir``, ``$HOPQA_DATA_DIR`` or a downloaded
release, so a prompt does not change with the data a run evaluates on. Missing shipped files
mean a broken installation and raise ``DemosUnavailableError`` (never a silent zero-shot
fallback). They are built once per process, under a lock.
"""

from __future__ import annotations

import re
import threading

from hopqa.datasets.paths import shipped_data_dir
from hopqa.datasets.records import DatasetError
from hopqa.datasets.registry import load_shipped
from hopqa.types import Demo, DemoStep, Example


class DemosUnavailableError(DatasetError):
    """The shipped train subsets the demonstrations come from cannot be read (a broken installation)."""


_REF = re.compile(r"#(\d+)")


def _natural(question: str) -> str:
    """'Entity >> relation' -> 'What is the relation of Entity?'; other text tidied."""
    if ">>" in question:
        entity, _, relation = (x.strip() for x in question.partition(">>"))
        return f"What is the {relation} of {entity}?"
    q = " ".join(question.split()).replace(" ?", "?")
    q = q[0].upper() + q[1:] if q else q
    return q if q.endswith("?") else q + "?"


def _resolve(text: str, answers: list[str]) -> str:
    return _REF.sub(lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers) else m.group(0), text)


def demo_from_musique(ex: Example) -> Demo | None:
    if not ex.decomposition:
        return None
    answers: list[str] = []
    steps = []
    for d in ex.decomposition:
        q = _natural(_resolve(d["question"], answers))
        idx = d.get("paragraph_support_idx")
        passage = ex.paragraphs[idx] if isinstance(idx, int) and 0 <= idx < len(ex.paragraphs) else None
        steps.append(DemoStep(q, d["answer"], passage))
        answers.append(d["answer"])
    return Demo(ex.question, ex.answer, tuple(steps), f"musique:{ex.id}", tuple(s.passage for s in steps if s.passage))


def demo_from_2wiki(ex: Example) -> Demo | None:
    if not ex.decomposition:
        return None
    by_title = {p.title: p for p in ex.supporting}
    ordered = [by_title[t] for t in dict.fromkeys(f[0] for f in ex.extras.get("supporting_facts", [])) if t in by_title]
    support = ordered or ex.supporting
    steps = []
    for i, d in enumerate(ex.decomposition):
        passage = support[i] if i < len(support) else None
        steps.append(DemoStep(_natural(d["question"]), d["answer"].strip(), passage))
    return Demo(ex.question, ex.answer, tuple(steps), f"2wikimultihopqa:{ex.id}", tuple(support))


def _usable(demo: Demo | None) -> bool:
    return (demo is not None and 2 <= len(demo.steps) <= 3 and all("#" not in s.question for s in demo.steps)
            and all(s.passage is not None for s in demo.steps) and len(demo.question) < 200)


_LOCK = threading.Lock()
_DEMOS: tuple[tuple[Demo, ...], tuple[Demo, ...]] | None = None


def _build_demos() -> tuple[tuple[Demo, ...], tuple[Demo, ...]]:
    """The usable MuSiQue and 2Wiki demonstrations of the shipped train subsets, in file order."""
    root = shipped_data_dir()
    try:
        musique = [demo_from_musique(e) for e in load_shipped("musique", "train")]
        wiki = [demo_from_2wiki(e) for e in load_shipped("2wikimultihopqa", "train")]
    except DatasetError as exc:
        raise DemosUnavailableError(
            f"the few-shot demonstrations are built from the train subsets shipped in {root}, which cannot be "
            f"read: this hopqa installation is broken (reinstall it): {exc}"
        ) from exc
    out = tuple(d for d in musique if _usable(d)), tuple(d for d in wiki if _usable(d))
    if not out[0] or not out[1]:
        raise DemosUnavailableError(f"no usable demonstration in the train subsets shipped in {root}: this hopqa "
                                    "installation is broken (reinstall it)")
    return out  # type: ignore[return-value]


def _all_demos() -> tuple[tuple[Demo, ...], tuple[Demo, ...]]:
    """Every usable demonstration, built once per process (threads wait for the first build)."""
    global _DEMOS
    with _LOCK:
        if _DEMOS is None:
            _DEMOS = _build_demos()
        return _DEMOS


def few_shot_demos(n: int) -> list[Demo]:
    """``n`` demonstrations alternating MuSiQue and 2Wiki train, from the shipped subsets.

    The same on every run and whatever data a run evaluates on; ``DemosUnavailableError`` if
    the shipped files are missing.
    """
    if n <= 0:
        return []
    musique, wiki = _all_demos()
    out: list[Demo] = []
    for i in range(max(len(musique), len(wiki))):
        for pool in (musique, wiki):
            if i < len(pool) and len(out) < n:
                out.append(pool[i])
    return out


#: The datasets whose shipped train subset can give answer demonstrations (``answer_demos``).
ANSWER_DEMO_DATASETS = ("musique", "2wikimultihopqa", "adversarial_hotpotqa", "hotpotqa")


def answer_demos(dataset: str, n: int) -> list[Demo]:
    """``n`` question-answer demonstrations with their supporting paragraphs, from the shipped
    train subset of ``dataset`` (one of ``ANSWER_DEMO_DATASETS``): the first examples in file
    order with gold support and a question under 200 characters, so a prompt is the same on
    every run. (GenSco's answer prompt, §4.3: "shots from the dataset's own training data".)"""
    if n <= 0:
        return []
    if dataset not in ANSWER_DEMO_DATASETS:
        raise DemosUnavailableError(f"no shipped training subset of {dataset!r} for answer demonstrations "
                                    f"(one of: {', '.join(ANSWER_DEMO_DATASETS)})")
    try:
        examples = load_shipped(dataset, "train")
    except DatasetError as exc:
        raise DemosUnavailableError(f"the {dataset} train subset shipped in {shipped_data_dir()} cannot be read: "
                                    f"this hopqa installation is broken (reinstall it): {exc}") from exc
    out = [Demo(ex.question, ex.answer, (), f"{dataset}:{ex.id}", tuple(ex.supporting))
           for ex in examples if ex.supporting and ex.answer and len(ex.question) < 200]
    return out[:n]
