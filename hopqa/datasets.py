"""Benchmark loaders: every shipped file normalised to one ``Example`` type.

The registry ``SPLITS`` maps each dataset (the folder names of the data directory) to its
splits and the file and parser each split reads. The data directory is found by
``default_data_dir``: an explicit path, else ``$HOPQA_DATA_DIR``, else ``../shared/data`` from
the working directory, else the ``shared/data`` folder beside this repository. Nothing here
is committed to the repository; ``download_dataset`` fetches official releases where a network
is available.

Normalisation: ``answers`` = gold answer then aliases; ``paragraphs`` = the question's own
candidates with ``is_supporting``; ``decomposition`` = gold sub-questions where the dataset
has them (MuSiQue, 2Wiki train ``qa_pairs``, Bamboogle's third-party Q1/Q2); dataset-specific
fields go to ``extras``. Malformed jsonl lines are skipped with a warning naming file:line.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hopqa.types import Example, Passage


class DatasetError(ValueError):
    """Unknown dataset or split, or a data file that cannot be found."""


def default_data_dir(explicit: str | Path | None = None) -> Path | None:
    """Where the benchmark files are (see the module docstring); None if nowhere."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("HOPQA_DATA_DIR")
    if env:
        return Path(env).expanduser()
    for candidate in (Path.cwd().parent / "shared" / "data", Path(__file__).resolve().parents[2] / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    return None


# -- field helpers ------------------------------------------------------------------------------
def _literal(value: Any) -> Any:
    """A field that may hold a JSON / Python literal as a string."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (json.JSONDecodeError, ValueError):
        pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def _join_sentences(sentences: list[str]) -> str:
    return " ".join(s.strip() for s in sentences if s and s.strip())


def _read_json_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a .json list or a .jsonl file (bad jsonl lines skipped with a warning)."""
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        yield from data if isinstance(data, list) else data.get("data", [])
        return
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                warnings.warn(f"{path}:{n}: skipped a malformed line ({exc.msg})", stacklevel=2)


def _read_csv(path: Path, header: bool = True) -> Iterator[dict[str, str] | list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        yield from (csv.DictReader(f) if header else csv.reader(f))


# -- parsers (one per file layout) --------------------------------------------------------------
def parse_musique(rec: dict[str, Any]) -> Example:
    eid = str(rec["id"])
    paragraphs = [
        Passage(id=f"{eid}#{p.get('idx', i)}", title=p.get("title", ""), text=p.get("paragraph_text", ""),
                is_supporting=bool(p.get("is_supporting", False)))
        for i, p in enumerate(_literal(rec.get("paragraphs")) or [])
    ]
    decomposition = [
        {"question": d.get("question", ""), "answer": d.get("answer", ""),
         "paragraph_support_idx": d.get("paragraph_support_idx")}
        for d in _literal(rec.get("question_decomposition")) or []
    ]
    aliases = [a for a in _literal(rec.get("answer_aliases")) or [] if a]
    return Example(id=eid, question=rec["question"], answers=[rec.get("answer", ""), *aliases],
                   paragraphs=paragraphs, decomposition=decomposition or None,
                   extras={"answerable": _literal(rec.get("answerable", True))})


def parse_hotpot_like(rec: dict[str, Any]) -> Example:
    """HotpotQA and 2WikiMultihopQA: ``context`` = [[title, [sentences]], ...]."""
    eid = str(rec.get("_id") or rec.get("id"))
    facts = [list(f) for f in _literal(rec.get("supporting_facts")) or []]
    gold_titles = {f[0] for f in facts}
    paragraphs = [
        Passage(id=f"{eid}#{i}", title=title, text=_join_sentences(sentences), is_supporting=title in gold_titles)
        for i, (title, sentences) in enumerate(_literal(rec.get("context")) or [])
    ]
    extras: dict[str, Any] = {"supporting_facts": facts}
    for key in ("type", "level", "evidences", "explanation", "entity_ids"):
        if key in rec:
            extras[key] = _literal(rec[key])
    decomposition = None
    if rec.get("qa_pairs"):
        decomposition = [{"question": q.get("question", ""), "answer": q.get("answer", "")}
                         for q in _literal(rec["qa_pairs"]) or []]
    return Example(id=eid, question=rec["question"], answers=[str(rec.get("answer", ""))], paragraphs=paragraphs,
                   decomposition=decomposition, extras=extras)


def parse_adversarial(rec: dict[str, Any]) -> Example:
    eid = str(rec["qas_id"])
    paragraphs = [
        Passage(id=f"{eid}#{i}", title=p.get("title", ""), text=p.get("context", ""),
                is_supporting=bool(p.get("is_supp", False)))
        for i, p in enumerate(rec.get("paragraphs") or [])
    ]
    return Example(id=eid, question=rec["question"], answers=[rec.get("answer", "")], paragraphs=paragraphs,
                   extras={"rationale": rec.get("rationale")})


def _adversarial_alt_answers(path: Path) -> dict[str, list[str]]:
    alt: dict[str, list[str]] = {}
    alt_file = path.parent / "alt_answers.jsonl"
    if alt_file.is_file():
        for rec in _read_json_records(alt_file):
            answer = rec.get("answer")
            answers = answer if isinstance(answer, list) else [answer]
            alt.setdefault(str(rec.get("qas_id")), []).extend(a for a in answers if a)
    return alt


# -- loaders per dataset (path -> examples) ----------------------------------------------------
def _load_records(parser: Callable[[dict[str, Any]], Example]) -> Callable[[Path], list[Example]]:
    return lambda path: [parser(r) for r in _read_json_records(path)]


def _load_adversarial(path: Path) -> list[Example]:
    alt = _adversarial_alt_answers(path)
    out = []
    for rec in _read_json_records(path):
        ex = parse_adversarial(rec)
        ex.answers += [a for a in alt.get(ex.id, []) if a not in ex.answers]
        out.append(ex)
    return out


def _load_bamboogle_csv(path: Path) -> list[Example]:
    out = []
    for i, row in enumerate(_read_csv(path, header=False)):
        assert isinstance(row, list)
        if len(row) >= 5 and row[0].strip():
            out.append(Example(id=f"bamboogle-{i}", question=row[0].strip(), answers=[row[4].strip()]))
    return out


def _load_bamboogle_json(path: Path) -> list[Example]:
    out = []
    for i, rec in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        steps = [{"question": rec[q], "answer": (rec.get(a) or [""])[0] if isinstance(rec.get(a), list) else rec.get(a)}
                 for q, a in (("Q1", "A1"), ("Q2", "A2")) if rec.get(q)]
        out.append(Example(id=f"bamboogle-{i}", question=rec["Question"], answers=[rec["Answer"]],
                           decomposition=steps or None, extras={"decomposition_source": "third party"}))
    return out


def _load_freshqa(split: str) -> Callable[[Path], list[Example]]:
    def load(path: Path) -> list[Example]:
        out = []
        for row in _read_csv(path):
            assert isinstance(row, dict)
            if (row.get("split") or "").strip().upper() != split.upper():
                continue
            answers = [row[f"answer_{i}"].strip() for i in range(10) if (row.get(f"answer_{i}") or "").strip()]
            extras = {k: row.get(k, "") for k in ("effective_year", "next_review", "num_hops", "fact_type", "source",
                                                  "note")}
            extras["false_premise"] = (row.get("false_premise") or "").strip().upper() == "TRUE"
            out.append(Example(id=f"freshqa-{row['id']}", question=row["question"].strip(), answers=answers,
                               extras=extras))
        return out

    return load


def _load_hgot_csv(dataset: str) -> Callable[[Path], list[Example]]:
    def load(path: Path) -> list[Example]:
        out = []
        for i, row in enumerate(_read_csv(path)):
            assert isinstance(row, dict)
            raw = row.get("Answer", "")
            parsed = _literal(raw) if dataset == "open_squad" else raw
            answers = [str(a) for a in parsed] if isinstance(parsed, list) else [str(raw)]
            extras: dict[str, Any] = {"question_length": int(row.get("Question Length") or 0)}
            if row.get("Level"):
                extras["level"] = row["Level"]
            if dataset == "fever":
                extras["label"] = raw
            out.append(Example(id=f"{dataset}-{path.stem}-{i}", question=row["Question"], answers=answers,
                               extras=extras))
        return out

    return load


@dataclass(frozen=True)
class SplitSpec:
    file: str
    loader: Callable[[Path], list[Example]]
    has_paragraphs: bool = False


def _hgot_splits(dataset: str, folder: str) -> dict[str, SplitSpec]:
    return {f"hgot-{part}-{length}": SplitSpec(f"{folder}/hgot/{part}_{length}.csv", _load_hgot_csv(dataset))
            for part in ("dev", "test") for length in ("long", "medium", "short")}


SPLITS: dict[str, dict[str, SplitSpec]] = {
    "musique": {
        "dev": SplitSpec("musique/dev_200.jsonl", _load_records(parse_musique), True),
        "train": SplitSpec("musique/train_100.json", _load_records(parse_musique), True),
    },
    "hotpotqa": {
        "dev": SplitSpec("hotpotqa/dev_distractor_200.jsonl", _load_records(parse_hotpot_like), True),
        "train": SplitSpec("hotpotqa/train_100.json", _load_records(parse_hotpot_like), True),
        **_hgot_splits("hotpotqa", "hotpotqa"),
    },
    "2wikimultihopqa": {
        "dev": SplitSpec("2wikimultihopqa/dev_164.jsonl", _load_records(parse_hotpot_like), True),
        "train": SplitSpec("2wikimultihopqa/train_500.json", _load_records(parse_hotpot_like), True),
    },
    "adversarial_hotpotqa": {
        "dev": SplitSpec("adversarial_hotpotqa/dev_308.json", _load_adversarial, True),
        "train": SplitSpec("adversarial_hotpotqa/train_30.json", _load_adversarial, True),
    },
    "bamboogle": {
        "test": SplitSpec("bamboogle/bamboogle_125.csv", _load_bamboogle_csv),
        "test-decomposed": SplitSpec("bamboogle/bamboogle_125_with_decomposition.json", _load_bamboogle_json),
    },
    "freshqa": {
        "test": SplitSpec("freshqa/freshqa_600.csv", _load_freshqa("test")),
        "dev": SplitSpec("freshqa/freshqa_600.csv", _load_freshqa("dev")),
    },
    "fever": _hgot_splits("fever", "fever"),
    "open_squad": _hgot_splits("open_squad", "open_squad"),
}


def canonical_name(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    if key not in SPLITS:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(SPLITS)}")
    return key


def split_path(name: str, split: str, data_dir: str | Path | None = None) -> Path:
    """The file a split reads (whether or not it exists)."""
    name = canonical_name(name)
    if split not in SPLITS[name]:
        raise DatasetError(f"dataset {name!r} has no split {split!r}; splits: {', '.join(SPLITS[name])}")
    root = default_data_dir(data_dir)
    if root is None:
        raise DatasetError("no data directory: pass --data-dir or set HOPQA_DATA_DIR")
    return root / SPLITS[name][split].file


def load_dataset(name: str, split: str = "dev", data_dir: str | Path | None = None,
                 limit: int | None = None) -> list[Example]:
    """Examples of one split, normalised (see the module docstring)."""
    name = canonical_name(name)
    path = split_path(name, split, data_dir)
    if not path.is_file():
        raise DatasetError(
            f"{name}/{split}: no file at {path}; point --data-dir or HOPQA_DATA_DIR at the data folder, "
            f"or fetch the official release with hopqa.datasets.download_dataset({name!r}, DIR)"
        )
    examples = SPLITS[name][split].loader(path)
    for ex in examples:
        ex.dataset, ex.split = name, split
    return examples[:limit] if limit is not None else examples


@dataclass
class DatasetInfo:
    name: str
    split: str
    path: Path
    exists: bool
    size: int


def list_datasets(data_dir: str | Path | None = None) -> list[DatasetInfo]:
    """Every (dataset, split) with its file and number of examples (0 if the file is missing)."""
    rows = []
    for name, splits in SPLITS.items():
        for split in splits:
            try:
                path = split_path(name, split, data_dir)
            except DatasetError:
                path = Path(SPLITS[name][split].file)
            exists = path.is_file()
            size = len(load_dataset(name, split, data_dir)) if exists else 0
            rows.append(DatasetInfo(name, split, path, exists, size))
    return rows


def demo_corpus_files(data_dir: str | Path | None = None) -> list[tuple[str, str]]:
    """The (dataset, split) pairs whose paragraphs make the demo corpus."""
    return [(name, split) for name, splits in SPLITS.items() for split, spec in splits.items() if spec.has_paragraphs]


def iter_paragraphs(examples: Iterable[Example]) -> Iterator[Passage]:
    """Every candidate paragraph of the examples (without gold flags)."""
    for ex in examples:
        for p in ex.paragraphs:
            yield Passage(id=p.id, title=p.title, text=p.text)


# -- official sources ---------------------------------------------------------------------------
#: Official download locations (raw formats; see ``download_dataset``).
OFFICIAL_SOURCES: dict[str, dict[str, str]] = {
    "hotpotqa": {
        "dev_distractor_v1.json": "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
        "train_v1.1.json": "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_train_v1.1.json",
    },
    "musique": {"musique_v1.0.zip": "https://github.com/StonyBrookNLP/musique/releases/download/v1.0/musique_v1.0.zip"},
    "2wikimultihopqa": {"data_ids_april7.zip": "https://www.dropbox.com/s/ms2m13252h6xubs/data_ids_april7.zip?dl=1"},
    "bamboogle": {"bamboogle.csv": "https://raw.githubusercontent.com/ofirpress/self-ask/main/datasets/bamboogle.csv"},
    "freshqa": {"freshqa.csv": "https://raw.githubusercontent.com/freshllms/freshqa/main/freshqa.csv"},
}


def download_dataset(name: str, dest_dir: str | Path, timeout: float = 30.0) -> list[Path]:
    """Download a dataset's official release files into ``dest_dir/<name>/``.

    The official files are the full releases in their own layouts (zip archives for MuSiQue
    and 2Wiki; HotpotQA's dev file is a JSON list, which the HotpotQA parser reads). Rename
    or convert them to the registry's file names (``SPLITS``) to load them. Needs a network:
    on an offline machine it raises a ``RuntimeError`` saying so.
    """
    import urllib.error
    import urllib.request

    name = canonical_name(name)
    if name not in OFFICIAL_SOURCES:
        raise DatasetError(f"no official download known for {name!r}; known: {', '.join(OFFICIAL_SOURCES)}")
    out = Path(dest_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, url in OFFICIAL_SOURCES[name].items():
        target = out / filename
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, open(target, "wb") as f:
                total = int(resp.headers.get("Content-Length") or 0) or None
                from tqdm import tqdm

                with tqdm(total=total, unit="B", unit_scale=True, desc=filename) as bar:
                    while chunk := resp.read(1 << 20):
                        f.write(chunk)
                        bar.update(len(chunk))
        except (urllib.error.URLError, OSError) as exc:
            target.unlink(missing_ok=True)
            raise RuntimeError(
                f"could not download {url} ({exc}); without a network, put the files in a data directory "
                "and pass it with --data-dir or HOPQA_DATA_DIR"
            ) from exc
        written.append(target)
    return written
