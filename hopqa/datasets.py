"""Benchmark loaders: every dataset file normalised to one ``Example`` type.

Registry
    ``REGISTRY`` maps each dataset name (the folder names of the data directory:
    ``musique``, ``hotpotqa``, ``2wikimultihopqa``, ``adversarial_hotpotqa``, ``bamboogle``,
    ``freshqa``, ``fever``, ``open_squad``) to a ``DatasetSpec`` whose ``splits`` map each split
    name to a ``SplitSpec``: the file(s) the split reads, relative to the data directory, and
    the reader that parses them. The first file of a split is the shipped subset
    (``musique/dev_200.jsonl``); the others are the names ``download_dataset`` gives the
    official full releases (``musique/musique_ans_v1.0_dev.jsonl``), so a directory filled by
    ``download_dataset`` loads with the same split names. Splits:

    ========================  ========================================================
    musique                   dev, train
    hotpotqa                  dev, train, hgot-{dev,test}-{long,medium,short}
    2wikimultihopqa           dev, train
    adversarial_hotpotqa      dev, train
    bamboogle                 test, test-decomposed
    freshqa                   test, dev (the CSV's ``split`` column)
    fever, open_squad         hgot-{dev,test}-{long,medium,short}
    ========================  ========================================================

    Dataset names accept ``-`` for ``_`` (``adversarial-hotpotqa``) and split names ``_`` for
    ``-`` (``hgot_test_long``), both case-insensitively.

Data directory
    ``default_data_dir`` finds it: an explicit path (``--data-dir``) wins; else the environment
    variable ``HOPQA_DATA_DIR`` (read only there); else ``../shared/data`` relative to the
    working directory; else the ``shared/data`` folder beside this repository
    (``Path(__file__).resolve().parents[2] / "shared" / "data"``); else ``None``. The data are
    never part of the repository.

Normalisation
    ``id`` is the dataset's own id where it has one (``qas_id``, ``_id``) and a positional one
    otherwise (``bamboogle-0``, ``fever-hgot-test-long-0``, ``freshqa-<id>``). ``answers`` holds
    the gold answer first, then its accepted aliases (MuSiQue ``answer_aliases``, Adversarial
    HotpotQA's ``alt_answers.jsonl``, FreshQA ``answer_0..9``, Open-SQuAD's answer list),
    stripped, without empty strings or repeats. ``paragraphs`` are the question's own candidate
    paragraphs with ``is_supporting`` (MuSiQue ``is_supporting``; HotpotQA / 2Wiki: the title is
    among the ``supporting_facts`` titles; Adversarial HotpotQA ``is_supp``), with ids
    ``"<example id>#<index>"``; HotpotQA / 2Wiki sentences are joined into one paragraph text
    (HotpotQA sentences carry their own leading spaces). ``decomposition`` is the gold list of
    sub-questions where a file has one (MuSiQue ``question_decomposition``, 2Wiki train
    ``qa_pairs``, Bamboogle's third-party Q1/A1/Q2/A2). Dataset-specific fields go to
    ``extras``. Structured fields stored as strings holding a JSON or Python literal are parsed
    (``json.loads``, then ``ast.literal_eval``; never ``eval``).

Robustness
    A malformed line of a ``.jsonl`` file, or a record without the fields a reader needs, is
    skipped with a ``DataWarning`` naming ``file:line`` and counted in ``LoadStats``; one bad
    line never stops a load. Unknown datasets and splits, a missing data directory and missing
    files raise ``DatasetError`` with the known names, or where the loader looked and how to
    point it elsewhere.
"""

from __future__ import annotations

import ast
import csv
import http.client
import json
import os
import re
import shutil
import urllib.error
import urllib.request
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from hopqa.corpus import CorpusStats, iter_json_lines
from hopqa.types import Example, Passage

__all__ = [
    "ENV_VAR",
    "OFFICIAL_SOURCES",
    "REGISTRY",
    "DataWarning",
    "DatasetError",
    "DatasetFileNotFoundError",
    "DatasetInfo",
    "DatasetSpec",
    "Download",
    "LoadStats",
    "SplitSpec",
    "canonical_name",
    "default_data_dir",
    "demo_corpus_files",
    "download_dataset",
    "iter_paragraphs",
    "list_datasets",
    "load_dataset",
    "split_path",
]

#: The environment variable that sets the data directory (read only by ``default_data_dir``).
ENV_VAR = "HOPQA_DATA_DIR"


class DatasetError(ValueError):
    """Unknown dataset or split, no data directory, or an unreadable data file."""


class DatasetFileNotFoundError(DatasetError, FileNotFoundError):
    """A split's data file is not in the data directory."""


class DataWarning(UserWarning):
    """A malformed line or record was skipped while loading a dataset."""


# -- data directory -------------------------------------------------------------------------------
def default_data_dir(explicit: str | Path | None = None) -> Path | None:
    """The benchmark data directory, or None if none is found.

    Order: ``explicit`` (returned even if it does not exist, so errors name it); the
    ``HOPQA_DATA_DIR`` environment variable; ``../shared/data`` from the working directory;
    ``shared/data`` beside this repository (``parents[2]`` of this file).
    """
    if explicit is not None and str(explicit).strip():
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    for candidate in (Path.cwd().parent / "shared" / "data",
                      Path(__file__).resolve().parents[2] / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    return None


# -- load statistics ------------------------------------------------------------------------------
@dataclass
class LoadStats(CorpusStats):
    """What one load read and skipped (pass one to ``load_dataset`` to see the counts);
    every skip is warned about as a ``DataWarning``."""

    category: ClassVar[type[Warning]] = DataWarning
    max_warnings: ClassVar[int | None] = None
    stacklevel: ClassVar[int] = 3


# -- field helpers --------------------------------------------------------------------------------
def _literal(value: Any) -> Any:
    """A structured field that may be stored as a string holding a JSON / Python literal."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{(\"'":
        return value
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def _as_list(value: Any, what: str) -> list[Any]:
    """A list field (parsed from a literal string if needed); None is an empty list."""
    value = _literal(value)
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"{what} is not a list: {str(value)[:60]!r}")


def _as_bool(value: Any, default: bool = False) -> bool:
    """``True``, ``"TRUE"``, ``"yes"``, ``1`` ... as a bool."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in {"true", "t", "yes", "y", "1"}:
            return True
        if text in {"false", "f", "no", "n", "0"}:
            return False
    return default


def _as_int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _answers(*candidates: Any) -> list[str]:
    """Gold answer then aliases: strings, stripped, no empties, no repeats (order kept)."""
    out: list[str] = []
    for candidate in candidates:
        text = str(candidate).strip() if candidate is not None else ""
        if text and text not in out:
            out.append(text)
    return out


def _text(value: Any) -> str:
    return str(value).strip() if value is not None else ""


def _require(rec: dict[str, Any], key: str) -> str:
    """A required non-empty text field of a record."""
    text = _text(rec.get(key))
    if not text:
        raise KeyError(f"no {key!r}")
    return text


_SENTENCE_END = (".", "!", "?", ";", ":")


def _join_sentences(sentences: Any) -> str:
    """One paragraph text from a list of sentences.

    HotpotQA sentences carry their own leading spaces (joined as they are, which restores the
    original text); 2Wiki sentences do not (joined with a space). Where a HotpotQA sentence
    lacks its space after a full stop (list items), a space is put back.
    """
    if isinstance(sentences, str):
        return " ".join(sentences.split())
    parts = [str(s) for s in sentences if s is not None and str(s).strip()]
    if not parts:
        return ""
    own_spacing = any(s[:1].isspace() for s in parts[1:])
    text = parts[0]
    for sentence in parts[1:]:
        if not own_spacing or (text.endswith(_SENTENCE_END) and sentence[:1].isalnum()):
            text += " "
        text += sentence
    return " ".join(text.split())


# -- raw records ----------------------------------------------------------------------------------
def _iter_json_records(path: Path, stats: LoadStats) -> Iterator[tuple[str, Any]]:
    """``(where, record)`` of a JSON list file or a JSON-lines file.

    A ``.jsonl`` file is read line by line (malformed lines skipped with a warning). Any other
    file is parsed whole (a list, or ``{"data": [...]}``) and read as JSON lines if that fails;
    a file that starts like a JSON list but does not parse is an error.
    """
    if path.suffix.lower() != ".jsonl":
        text = path.read_text(encoding="utf-8-sig")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if text.lstrip().startswith("["):
                raise DatasetError(f"{path}: not valid JSON ({exc})") from exc
        else:
            if isinstance(data, dict):
                data = data["data"] if isinstance(data.get("data"), list) else [data]
            if not isinstance(data, list):
                raise DatasetError(f"{path}: expected a JSON list of records")
            for i, rec in enumerate(data):
                yield f"{path} record {i}", rec
            return
    yield from _iter_json_lines(path, stats)


def _iter_json_lines(path: Path, stats: LoadStats) -> Iterator[tuple[str, Any]]:
    for n, rec in iter_json_lines(path, stats):
        if isinstance(rec, list):  # a whole JSON list on one line
            for i, item in enumerate(rec):
                yield f"{path}:{n} item {i}", item
        else:
            yield f"{path}:{n}", rec


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line number, cells)`` of a CSV file; quoted fields may span lines."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        start = 1
        for row in reader:
            yield start, row
            start = reader.line_num + 1


def _csv_records(path: Path, required: Iterable[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """``(where, row)`` of a CSV file with a header row holding the ``required`` columns.

    Rows before that header (a title banner, as in spreadsheet exports) are ignored; column
    names are matched case-insensitively and returned lower-cased.
    """
    need = {c.lower() for c in required}
    header: list[str] | None = None
    for n, row in _csv_rows(path):
        cells = [c.strip().lower() for c in row]
        if header is None:
            if need <= set(cells):
                header = cells
            continue
        if not any(c.strip() for c in row):
            continue
        yield f"{path}:{n}", {h: (row[i] if i < len(row) else "") for i, h in enumerate(header) if h}
    if header is None:
        raise DatasetError(f"{path}: no header row with the columns {', '.join(sorted(need))}")


# -- per-record parsers ---------------------------------------------------------------------------
def parse_musique(rec: dict[str, Any]) -> Example:
    """One MuSiQue record (official format)."""
    eid = _require(rec, "id")
    paragraphs = [
        Passage(id=f"{eid}#{p.get('idx', i)}", title=_text(p.get("title")),
                text=_text(p.get("paragraph_text")), is_supporting=_as_bool(p.get("is_supporting")))
        for i, p in enumerate(_as_list(rec.get("paragraphs"), "paragraphs"))
    ]
    decomposition = [
        {"question": _text(d.get("question")), "answer": _text(d.get("answer")),
         "paragraph_support_idx": d.get("paragraph_support_idx")}
        for d in _as_list(rec.get("question_decomposition"), "question_decomposition")
    ]
    aliases = _as_list(rec.get("answer_aliases"), "answer_aliases")
    return Example(id=eid, question=_require(rec, "question"), answers=_answers(rec.get("answer"), *aliases),
                   paragraphs=paragraphs, decomposition=decomposition or None,
                   extras={"answerable": _as_bool(rec.get("answerable"), default=True)})


def _title_sentences(context: Any) -> list[tuple[str, Any]]:
    """HotpotQA ``context`` as (title, sentences): ``[[title, [...]], ...]`` or the
    Hugging Face layout ``{"title": [...], "sentences": [[...], ...]}``."""
    context = _literal(context)
    if isinstance(context, dict):
        return list(zip(context.get("title") or [], context.get("sentences") or [], strict=False))
    return [(_text(item[0]), item[1]) for item in _as_list(context, "context")]


def _supporting_facts(value: Any) -> list[list[Any]]:
    """``[[title, sentence index], ...]`` (also from the Hugging Face dict layout)."""
    value = _literal(value)
    if isinstance(value, dict):
        value = list(zip(value.get("title") or [], value.get("sent_id") or [], strict=False))
    return [[_text(f[0]), _as_int(f[1]) if len(f) > 1 else None]
            for f in _as_list(value, "supporting_facts")]


def parse_hotpot(rec: dict[str, Any]) -> Example:
    """One HotpotQA or 2WikiMultihopQA record (``context`` = [[title, [sentences]], ...])."""
    eid = _text(rec.get("_id")) or _require(rec, "id")
    facts = _supporting_facts(rec.get("supporting_facts"))
    gold = {f[0] for f in facts}
    paragraphs = [
        Passage(id=f"{eid}#{i}", title=title, text=_join_sentences(sentences), is_supporting=title in gold)
        for i, (title, sentences) in enumerate(_title_sentences(rec.get("context")))
    ]
    extras: dict[str, Any] = {"supporting_facts": facts}
    for key in ("type", "level"):
        if rec.get(key) is not None:
            extras[key] = rec[key]
    if "evidences" in rec:
        extras["evidences"] = _as_list(rec["evidences"], "evidences")
    decomposition = None
    if rec.get("qa_pairs"):
        pairs = _as_list(rec["qa_pairs"], "qa_pairs")
        extras["qa_pairs"] = pairs
        decomposition = [{"question": _text(q.get("question")), "answer": _text(q.get("answer"))} for q in pairs]
    if rec.get("explanation"):
        extras["explanation"] = rec["explanation"]
    return Example(id=eid, question=_require(rec, "question"), answers=_answers(rec.get("answer")),
                   paragraphs=paragraphs, decomposition=decomposition or None, extras=extras)


def parse_adversarial(rec: dict[str, Any]) -> Example:
    """One Adversarial HotpotQA record (Ye & Durrett's ``sim_*.json`` layout)."""
    eid = _require(rec, "qas_id")
    paragraphs = [
        Passage(id=f"{eid}#{i}", title=_text(p.get("title")), text=_text(p.get("context")),
                is_supporting=_as_bool(p.get("is_supp")))
        for i, p in enumerate(_as_list(rec.get("paragraphs"), "paragraphs"))
    ]
    return Example(id=eid, question=_require(rec, "question"), answers=_answers(rec.get("answer")),
                   paragraphs=paragraphs, extras={"rationale": _as_list(rec.get("rationale"), "rationale")})


# -- readers (path -> examples) -------------------------------------------------------------------
@dataclass
class _Context:
    """What a reader knows about the split it reads."""

    name: str
    split: str
    spec: SplitSpec
    stats: LoadStats


_RECORD_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def _parse_each(items: Iterable[tuple[str, Any]], parse: Callable[[Any], Example],
                stats: LoadStats) -> Iterator[Example]:
    """Parse records, skipping (with a warning) those a parser cannot read."""
    for where, rec in items:
        try:
            if not isinstance(rec, dict):
                raise TypeError(f"a {type(rec).__name__}, not a JSON object")
            example = parse(rec)
        except _RECORD_ERRORS as exc:
            stats.skip(where, f"unreadable record: {exc}")
            continue
        stats.read += 1
        yield example


def _read_musique(path: Path, ctx: _Context) -> Iterator[Example]:
    return _parse_each(_iter_json_records(path, ctx.stats), parse_musique, ctx.stats)


def _read_hotpot(path: Path, ctx: _Context) -> Iterator[Example]:
    return _parse_each(_iter_json_records(path, ctx.stats), parse_hotpot, ctx.stats)


def _alt_answers(path: Path, stats: LoadStats) -> dict[str, list[str]]:
    """Adversarial HotpotQA's accepted alternative answers by ``qas_id`` (if the file exists)."""
    alt: dict[str, list[str]] = {}
    if not path.is_file():
        return alt
    for where, rec in _iter_json_records(path, stats):
        if not isinstance(rec, dict) or not rec.get("qas_id"):
            stats.skip(where, "no qas_id")
            continue
        answer = _literal(rec.get("answer"))
        answers = answer if isinstance(answer, list) else [answer]
        alt.setdefault(str(rec["qas_id"]), []).extend(str(a) for a in answers if a)
    return alt


def _read_adversarial(path: Path, ctx: _Context) -> Iterator[Example]:
    alt = _alt_answers(path.parent / "alt_answers.jsonl", ctx.stats)
    for example in _parse_each(_iter_json_records(path, ctx.stats), parse_adversarial, ctx.stats):
        example.answers = _answers(*example.answers, *alt.get(example.id, []))
        yield example


def _read_bamboogle_csv(path: Path, ctx: _Context) -> Iterator[Example]:
    """Bamboogle CSV: no header, question in column 1, answer in column 5 (later non-empty
    columns are alternative answers); a ``Question,Answer`` header row is also understood."""
    q_col, a_col, header = 0, 4, False
    index = 0
    for n, row in _csv_rows(path):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        lowered = [c.lower() for c in cells]
        if index == 0 and not header and "question" in lowered and "answer" in lowered:
            q_col, a_col, header = lowered.index("question"), lowered.index("answer"), True
            continue
        if len(cells) <= max(q_col, a_col) or not cells[q_col] or not cells[a_col]:
            ctx.stats.skip(f"{path}:{n}", f"expected a question in column {q_col + 1} and an answer in "
                                          f"column {a_col + 1}")
            continue
        aliases = [] if header else cells[a_col + 1:]
        ctx.stats.read += 1
        yield Example(id=f"bamboogle-{index}", question=cells[q_col], answers=_answers(cells[a_col], *aliases))
        index += 1


def _first(value: Any) -> str:
    value = _literal(value)
    if isinstance(value, (list, tuple)):
        return _text(value[0]) if value else ""
    return _text(value)


def _bamboogle_decomposed(rec: dict[str, Any], index: int) -> Example:
    steps = []
    k = 1
    while f"Q{k}" in rec:
        answers = _literal(rec.get(f"A{k}"))
        answers = list(answers) if isinstance(answers, (list, tuple)) else [answers]
        steps.append({"question": _text(rec[f"Q{k}"]), "answer": _first(answers), "answers": _answers(*answers)})
        k += 1
    return Example(id=f"bamboogle-{index}", question=_require(rec, "Question"), answers=_answers(rec.get("Answer")),
                   decomposition=steps or None, extras={"decomposition_source": "third party (not official)"})


def _read_bamboogle_json(path: Path, ctx: _Context) -> Iterator[Example]:
    """Bamboogle with a third-party decomposition: ``Question, Answer, Q1, A1, Q2, A2`` records."""
    for index, (where, rec) in enumerate(_iter_json_records(path, ctx.stats)):
        try:
            if not isinstance(rec, dict):
                raise TypeError(f"a {type(rec).__name__}, not a JSON object")
            example = _bamboogle_decomposed(rec, index)
        except _RECORD_ERRORS as exc:
            ctx.stats.skip(where, f"unreadable record: {exc}")
            continue
        ctx.stats.read += 1
        yield example


_FRESHQA_EXTRAS = ("num_hops", "fact_type", "effective_year", "next_review", "source")
_ANSWER_COLUMN = re.compile(r"answer_(\d+)$")


def _freshqa_example(row: dict[str, str]) -> Example:
    columns = sorted((int(m.group(1)), key) for key in row if (m := _ANSWER_COLUMN.match(key)))
    extras: dict[str, Any] = {key: _text(row.get(key)) for key in _FRESHQA_EXTRAS}
    extras["false_premise"] = _as_bool(row.get("false_premise"))
    return Example(id=f"freshqa-{_require(row, 'id')}", question=_require(row, "question"),
                   answers=_answers(*(row[key] for _, key in columns)), extras=extras)


def _read_freshqa(path: Path, ctx: _Context) -> Iterator[Example]:
    """FreshQA CSV: the rows whose ``split`` column is the split (``TEST`` / ``DEV``)."""
    wanted = ctx.spec.select.upper()
    for where, row in _csv_records(path, ("id", "split", "question")):
        if _text(row.get("split")).upper() != wanted:
            continue
        try:
            example = _freshqa_example(row)
        except _RECORD_ERRORS as exc:
            ctx.stats.skip(where, f"unreadable row: {exc}")
            continue
        if not example.answers:
            ctx.stats.skip(where, "no answer_0..answer_9")
            continue
        ctx.stats.read += 1
        yield example


_FEVER_INSTRUCTION = re.compile(r"\s*Kindly answer with .*$", re.DOTALL)


def _hgot_answers(name: str, raw: str) -> list[str]:
    """HGOT's Answer column: a Python-literal list for Open-SQuAD, plain text elsewhere."""
    if name != "open_squad":
        return _answers(raw)
    try:
        parsed = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _answers(raw)
    if isinstance(parsed, (list, tuple)):
        return _answers(*parsed)
    return _answers(parsed)


def _hgot_example(row: dict[str, str], name: str, split: str, index: int) -> Example:
    question = _require(row, "question")
    extras: dict[str, Any] = {"question_length": _as_int(row.get("question length"))}
    if _text(row.get("level")):
        extras["level"] = _text(row.get("level"))
    if name == "fever":
        extras["label"] = _text(row.get("answer"))
        extras["claim"] = _FEVER_INSTRUCTION.sub("", question)
    return Example(id=f"{name}-{split}-{index}", question=question,
                   answers=_hgot_answers(name, row.get("answer") or ""), extras=extras)


def _read_hgot(path: Path, ctx: _Context) -> Iterator[Example]:
    """HGOT's length-stratified samples: ``Question,Answer,[Level,]Question Length``."""
    index = 0
    for where, row in _csv_records(path, ("question", "answer")):
        try:
            example = _hgot_example(row, ctx.name, ctx.split, index)
        except _RECORD_ERRORS as exc:
            ctx.stats.skip(where, f"unreadable row: {exc}")
            continue
        if not example.answers:
            ctx.stats.skip(where, "empty Answer")
            continue
        ctx.stats.read += 1
        index += 1
        yield example


# -- registry -------------------------------------------------------------------------------------
Reader = Callable[[Path, _Context], Iterator[Example]]


@dataclass(frozen=True)
class SplitSpec:
    """One split: candidate files (relative to the data directory) and the reader.

    ``files[0]`` is the shipped subset; later names are the official full releases as
    ``download_dataset`` saves them. ``select`` is a reader option (FreshQA's split value).
    """

    files: tuple[str, ...]
    reader: Reader
    has_paragraphs: bool = False
    select: str = ""

    @property
    def file(self) -> str:
        return self.files[0]


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset: its name (the data folder), a one-line description and its splits."""

    name: str
    description: str
    splits: dict[str, SplitSpec]


def _hgot_splits(folder: str) -> dict[str, SplitSpec]:
    return {f"hgot-{part}-{length}": SplitSpec((f"{folder}/hgot/{part}_{length}.csv",), _read_hgot)
            for part in ("dev", "test") for length in ("long", "medium", "short")}


def _build_registry() -> dict[str, DatasetSpec]:
    specs = [
        DatasetSpec("musique", "MuSiQue-Ans: 2-4 hop questions, 20 paragraphs, gold decomposition", {
            "dev": SplitSpec(("musique/dev_200.jsonl", "musique/musique_ans_v1.0_dev.jsonl"), _read_musique, True),
            "train": SplitSpec(("musique/train_100.json", "musique/musique_ans_v1.0_train.jsonl"), _read_musique,
                               True),
        }),
        DatasetSpec("hotpotqa", "HotpotQA distractor setting (10 paragraphs) and HGOT's samples", {
            "dev": SplitSpec(("hotpotqa/dev_distractor_200.jsonl", "hotpotqa/hotpot_dev_distractor_v1.json"),
                             _read_hotpot, True),
            "train": SplitSpec(("hotpotqa/train_100.json", "hotpotqa/hotpot_train_v1.1.json"), _read_hotpot, True),
            **_hgot_splits("hotpotqa"),
        }),
        DatasetSpec("2wikimultihopqa", "2WikiMultihopQA: 10 paragraphs, evidence triples", {
            "dev": SplitSpec(("2wikimultihopqa/dev_164.jsonl", "2wikimultihopqa/dev.json"), _read_hotpot, True),
            "train": SplitSpec(("2wikimultihopqa/train_500.json", "2wikimultihopqa/train.json"), _read_hotpot, True),
        }),
        DatasetSpec("adversarial_hotpotqa", "Adversarial HotpotQA: 2 gold + 2 adversarial paragraphs", {
            "dev": SplitSpec(("adversarial_hotpotqa/dev_308.json",), _read_adversarial, True),
            "train": SplitSpec(("adversarial_hotpotqa/train_30.json",), _read_adversarial, True),
        }),
        DatasetSpec("bamboogle", "Bamboogle: 2-hop open-domain questions", {
            "test": SplitSpec(("bamboogle/bamboogle_125.csv", "bamboogle/bamboogle.csv"), _read_bamboogle_csv),
            "test-decomposed": SplitSpec(("bamboogle/bamboogle_125_with_decomposition.json",),
                                         _read_bamboogle_json),
        }),
        DatasetSpec("freshqa", "FreshQA: time-sensitive and false-premise questions", {
            "test": SplitSpec(("freshqa/freshqa_600.csv", "freshqa/freshqa.csv"), _read_freshqa, select="TEST"),
            "dev": SplitSpec(("freshqa/freshqa_600.csv", "freshqa/freshqa.csv"), _read_freshqa, select="DEV"),
        }),
        DatasetSpec("fever", "FEVER claims (SUPPORTS / REFUTES / NOT ENOUGH INFO), HGOT's samples",
                    _hgot_splits("fever")),
        DatasetSpec("open_squad", "Open-SQuAD, HGOT's samples", _hgot_splits("open_squad")),
    ]
    return {spec.name: spec for spec in specs}


#: Every dataset by name (see the module docstring).
REGISTRY: dict[str, DatasetSpec] = _build_registry()


def canonical_name(name: str) -> str:
    """The registry name of a dataset (``adversarial-hotpotqa`` -> ``adversarial_hotpotqa``)."""
    key = str(name).strip().lower().replace("-", "_")
    if key not in REGISTRY:
        raise DatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(REGISTRY)}")
    return key


def _split_name(name: str, split: str) -> str:
    """The registry name of a split of a (canonical) dataset."""
    key = str(split).strip().lower().replace("_", "-")
    splits = REGISTRY[name].splits
    if key not in splits:
        raise DatasetError(f"dataset {name!r} has no split {split!r}; its splits: {', '.join(splits)}")
    return key


def _require_data_dir(data_dir: str | Path | None) -> Path:
    root = default_data_dir(data_dir)
    if root is None:
        raise DatasetError(
            f"no data directory found (looked at ${ENV_VAR}, ../shared/data from the working directory and "
            "shared/data beside the repository): pass --data-dir or set HOPQA_DATA_DIR to the folder that "
            "holds musique/, hotpotqa/, ...; hopqa.datasets.download_dataset(name, DIR) can fetch the "
            "official releases"
        )
    return root


def split_path(name: str, split: str, data_dir: str | Path | None = None) -> Path:
    """The file a split reads: the first of its candidate files that exists, else the shipped
    subset's path (which does not exist)."""
    key = canonical_name(name)
    spec = REGISTRY[key].splits[_split_name(key, split)]
    root = _require_data_dir(data_dir)
    for rel in spec.files:
        if (root / rel).is_file():
            return root / rel
    return root / spec.file


def _missing_file_error(name: str, split: str, root: Path) -> DatasetFileNotFoundError:
    spec = REGISTRY[name].splits[split]
    looked = ", ".join(str(root / rel) for rel in spec.files)
    fetch = (f"or fetch the official release with hopqa.datasets.download_dataset({name!r}, DIR)"
             if name in OFFICIAL_SOURCES else
             f"({name} has no official download here: copy its files into DIR/{name}/ by hand)")
    where = "data directory does not exist" if not root.is_dir() else "no such file"
    return DatasetFileNotFoundError(
        f"{name}/{split}: {where}: looked for {looked}. Point --data-dir or HOPQA_DATA_DIR at the folder "
        f"that holds {name}/, {fetch}"
    )


def load_dataset(name: str, split: str = "dev", data_dir: str | Path | None = None,
                 limit: int | None = None, stats: LoadStats | None = None) -> list[Example]:
    """The examples of one split, normalised (see the module docstring).

    ``limit`` keeps the first examples only; ``stats`` (optional) receives how many records
    were read and skipped. Raises ``DatasetError`` for an unknown dataset or split or a
    missing data directory, ``DatasetFileNotFoundError`` for a missing file.
    """
    key = canonical_name(name)
    split_key = _split_name(key, split)
    if limit is not None and limit < 0:
        raise DatasetError(f"limit must be >= 0, not {limit}")
    root = _require_data_dir(data_dir)
    path = split_path(key, split_key, root)
    if not path.is_file():
        raise _missing_file_error(key, split_key, root)
    spec = REGISTRY[key].splits[split_key]
    ctx = _Context(key, split_key, spec, stats if stats is not None else LoadStats())
    examples: list[Example] = []
    if limit == 0:
        return examples
    for example in spec.reader(path, ctx):
        example.dataset, example.split = key, split_key
        examples.append(example)
        if limit is not None and len(examples) >= limit:
            break
    return examples


@dataclass
class DatasetInfo:
    """One (dataset, split): its file, whether it exists and its number of examples."""

    name: str
    split: str
    path: Path
    exists: bool
    size: int
    has_paragraphs: bool = False


def _count(name: str, split: str, root: Path) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return len(load_dataset(name, split, data_dir=root))


def list_datasets(data_dir: str | Path | None = None) -> list[DatasetInfo]:
    """Every registered (dataset, split) with its file and size (0 when the file is missing).

    Without a data directory the paths are relative to it and nothing exists.
    """
    root = default_data_dir(data_dir)
    rows = []
    for name, dataset in REGISTRY.items():
        for split, spec in dataset.splits.items():
            path = split_path(name, split, root) if root is not None else Path(spec.file)
            exists = root is not None and path.is_file()
            size = _count(name, split, root) if exists and root is not None else 0
            rows.append(DatasetInfo(name, split, path, exists, size, spec.has_paragraphs))
    return rows


def demo_corpus_files(data_dir: str | Path | None = None) -> list[tuple[str, str]]:
    """The (dataset, split) pairs whose paragraphs make the demo corpus.

    Every split with paragraphs: the dev and train splits of musique, hotpotqa, 2wikimultihopqa
    and adversarial_hotpotqa. Those whose files are missing from ``data_dir`` are left out,
    unless none is present (then all are returned, so that loading them says what is missing).
    """
    pairs = [(name, split) for name, dataset in REGISTRY.items()
             for split, spec in dataset.splits.items() if spec.has_paragraphs]
    root = default_data_dir(data_dir)
    if root is None or not root.is_dir():
        return pairs
    present = [(name, split) for name, split in pairs if split_path(name, split, root).is_file()]
    return present or pairs


def iter_paragraphs(examples: Iterable[Example]) -> Iterator[Passage]:
    """Every candidate paragraph of the examples, as plain passages (no gold flag, no score)."""
    for example in examples:
        for p in example.paragraphs:
            yield Passage(id=p.id, title=p.title, text=p.text)


# -- official downloads ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Download:
    """One official file: fetched from ``url`` into ``<dest>/<dataset>/<filename>``; for a zip,
    the members named in ``extract`` (by base name) are saved under the given names and the
    archive is removed."""

    url: str
    filename: str
    extract: tuple[tuple[str, str], ...] = ()


#: Official releases (see ``download_dataset`` for how they map onto the registry).
OFFICIAL_SOURCES: dict[str, tuple[Download, ...]] = {
    # StonyBrookNLP/musique download_data.sh: Google Drive file 1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h.
    "musique": (Download(
        "https://drive.usercontent.google.com/download?id=1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h&export=download&confirm=t",
        "musique_v1.0.zip",
        (("musique_ans_v1.0_dev.jsonl", "musique_ans_v1.0_dev.jsonl"),
         ("musique_ans_v1.0_train.jsonl", "musique_ans_v1.0_train.jsonl")),
    ),),
    "hotpotqa": (
        Download("http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
                 "hotpot_dev_distractor_v1.json"),
        Download("http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_train_v1.1.json", "hotpot_train_v1.1.json"),
    ),
    # Alab-NII/2wikimultihop README (April 7, 2021 release with evidences_id / answer_id).
    "2wikimultihopqa": (Download(
        "https://www.dropbox.com/s/ms2m13252h6xubs/data_ids_april7.zip?dl=1",
        "data_ids_april7.zip",
        (("dev.json", "dev.json"), ("train.json", "train.json")),
    ),),
    "bamboogle": (Download("https://raw.githubusercontent.com/ofirpress/self-ask/main/datasets/bamboogle.csv",
                           "bamboogle.csv"),),
    # freshllms/freshqa links its weekly snapshots as Google Sheets; this is the CSV export of
    # the snapshot of 13 May 2024 (the shipped subset is a December 2023 snapshot).
    "freshqa": (Download(
        "https://docs.google.com/spreadsheets/d/1p0qXk1iqSwV9Pq2DpivwtxfKUjLyK_n-k3jgtlDb_54/export?format=csv",
        "freshqa.csv",
    ),),
}


class _NoProgress:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int | None, desc: str) -> Any:
    """A tqdm byte counter if tqdm is installed, else a silent stand-in."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoProgress()
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc)


_NETWORK_ERRORS = (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException)


def _fetch(url: str, target: Path, timeout: float, name: str) -> None:
    """Stream ``url`` into ``target`` (via ``target.part``); RuntimeError if it cannot."""
    part = target.with_name(target.name + ".part")
    request = urllib.request.Request(url, headers={"User-Agent": "hopqa (dataset download)"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, open(part, "wb") as out:
            if response.headers.get_content_type() == "text/html":
                raise RuntimeError(
                    f"{url} returned a web page instead of the data file (a sign-in, quota or confirmation "
                    f"page); download it in a browser and put it in DATA_DIR/{name}/{target.name}"
                )
            total = int(response.headers.get("Content-Length") or 0) or None
            bar = _progress(total, target.name)
            try:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    bar.update(len(chunk))
            finally:
                bar.close()
    except urllib.error.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise RuntimeError(
            f"could not download {url}: HTTP {exc.code} {exc.reason} (the release may have moved); download it by "
            f"hand and put it in DATA_DIR/{name}/{target.name} (DATA_DIR = --data-dir or HOPQA_DATA_DIR)"
        ) from exc
    except _NETWORK_ERRORS as exc:
        part.unlink(missing_ok=True)
        reason = getattr(exc, "reason", exc)
        raise RuntimeError(
            f"no network: put the files in DATA_DIR/{name}/ by hand (DATA_DIR = --data-dir or HOPQA_DATA_DIR), "
            f"or retry where the internet is reachable (could not reach {url}: {reason})"
        ) from exc
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(target)


def _extract(archive: Path, members: tuple[tuple[str, str], ...], out_dir: Path) -> list[Path]:
    """Save the named members of a zip (matched by base name) into ``out_dir``."""
    written = []
    with zipfile.ZipFile(archive) as zf:
        by_base = {Path(info.filename).name: info for info in zf.infolist()
                   if not info.is_dir() and "__MACOSX" not in info.filename}
        for member, saved in members:
            if member not in by_base:
                raise RuntimeError(f"{archive}: no member {member!r} (members: {', '.join(sorted(by_base))})")
            target = out_dir / saved
            with zf.open(by_base[member]) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            written.append(target)
    return written


def download_dataset(name: str, dest_dir: str | Path, timeout: float = 60.0) -> list[Path]:
    """Download a dataset's official release into ``dest_dir/<name>/``; the paths written.

    Sources (``OFFICIAL_SOURCES``): MuSiQue from the Google Drive file of StonyBrookNLP/musique
    (the ``musique_ans_v1.0_{dev,train}.jsonl`` members of the zip); HotpotQA
    ``hotpot_dev_distractor_v1.json`` and ``hotpot_train_v1.1.json`` from curtis.ml.cmu.edu
    (JSON lists, which the HotpotQA reader accepts); 2WikiMultihopQA ``dev.json`` and
    ``train.json`` from the Dropbox release linked by Alab-NII/2wikimultihop; Bamboogle's CSV
    from the ofirpress/self-ask repository; FreshQA's CSV export of the Google Sheet that
    freshllms/freshqa links. The files keep their official names, which the registry lists
    after the shipped subsets' names, so ``load_dataset(name, split, data_dir=dest_dir)``
    reads them with the same split names.

    Gaps against the shipped subsets: the official files are the full sets (thousands of
    questions, the loader reads them all); official 2Wiki train has no ``qa_pairs`` /
    ``explanation`` (those come from the MIGRES preprocessing), so no decomposition; FreshQA
    answers change weekly. Adversarial HotpotQA, Bamboogle's decomposition and the HGOT samples
    (FEVER, Open-SQuAD, HotpotQA ``hgot-*``) are third-party files with no official download:
    copy them by hand. Uses ``urllib`` with ``timeout`` seconds per network operation and a
    tqdm progress bar when tqdm is installed; raises ``RuntimeError`` ("no network: ...") when
    a source cannot be reached, leaving no partial file behind.
    """
    key = canonical_name(name)
    if key not in OFFICIAL_SOURCES:
        raise DatasetError(f"no official download for {key!r}: copy its files into DATA_DIR/{key}/ by hand; "
                           f"downloadable: {', '.join(OFFICIAL_SOURCES)}")
    out_dir = Path(dest_dir).expanduser() / key
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for source in OFFICIAL_SOURCES[key]:
        target = out_dir / source.filename
        _fetch(source.url, target, timeout, key)
        if source.extract:
            written.extend(_extract(target, source.extract, out_dir))
            target.unlink()
        else:
            written.append(target)
    return written
