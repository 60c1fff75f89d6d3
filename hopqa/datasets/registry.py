"""The registered benchmarks, their splits and files; ``load_dataset`` and ``list_datasets``.

``REGISTRY`` maps each dataset name (``musique``, ``hotpotqa``, ``2wikimultihopqa``,
``adversarial_hotpotqa``, ``bamboogle``, ``freshqa``, ``fever``, ``open_squad``) to a
``DatasetSpec`` whose ``splits`` map each split name to a ``SplitSpec``: the candidate files
of the split, relative to a data root, and the reader that parses them. ``files[0]`` is the
shipped subset's name (``musique/dev_200.jsonl``); later names are those ``download_dataset``
gives the official full releases (``musique/musique_ans_v1.0_dev.jsonl``), so a root filled by
a download loads with the same split names. Each candidate may also be gzip-compressed
(``<rel>.gz``, as the shipped subsets are). Splits:

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
``-`` (``hgot_test_long``), both case-insensitively. Which root serves a split is decided per
split by ``hopqa.datasets.paths``; a name that is not registered but is a path to a question
file (``my_questions.jsonl``) is read by ``hopqa.datasets.generic``.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hopqa.datasets.bamboogle import read_bamboogle_csv, read_bamboogle_json
from hopqa.datasets.download import OFFICIAL_SOURCES
from hopqa.datasets.freshqa import read_freshqa
from hopqa.datasets.generic import is_question_file, iter_question_file
from hopqa.datasets.hgot import read_hgot
from hopqa.datasets.hotpot import read_adversarial, read_hotpot
from hopqa.datasets.musique import read_musique
from hopqa.datasets.paths import candidates, data_roots, find_file, shipped_data_dir
from hopqa.datasets.records import (
    DatasetError,
    DatasetFileNotFoundError,
    DataWarning,
    LoadStats,
    ReadContext,
    Reader,
)
from hopqa.types import Example


@dataclass(frozen=True)
class SplitSpec:
    """One split: candidate files (relative to a data root) and the reader.

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
    return {f"hgot-{part}-{length}": SplitSpec((f"{folder}/hgot/{part}_{length}.csv",), read_hgot)
            for part in ("dev", "test") for length in ("long", "medium", "short")}


def _build_registry() -> dict[str, DatasetSpec]:
    specs = [
        DatasetSpec("musique", "MuSiQue-Ans: 2-4 hop questions, 20 paragraphs, gold decomposition", {
            "dev": SplitSpec(("musique/dev_200.jsonl", "musique/musique_ans_v1.0_dev.jsonl"), read_musique, True),
            "train": SplitSpec(("musique/train_100.json", "musique/musique_ans_v1.0_train.jsonl"), read_musique,
                               True),
        }),
        DatasetSpec("hotpotqa", "HotpotQA distractor setting (10 paragraphs) and HGOT's samples", {
            "dev": SplitSpec(("hotpotqa/dev_distractor_200.jsonl", "hotpotqa/hotpot_dev_distractor_v1.json"),
                             read_hotpot, True),
            "train": SplitSpec(("hotpotqa/train_100.json", "hotpotqa/hotpot_train_v1.1.json"), read_hotpot, True),
            **_hgot_splits("hotpotqa"),
        }),
        DatasetSpec("2wikimultihopqa", "2WikiMultihopQA: 10 paragraphs, evidence triples", {
            "dev": SplitSpec(("2wikimultihopqa/dev_164.jsonl", "2wikimultihopqa/dev.json"), read_hotpot, True),
            "train": SplitSpec(("2wikimultihopqa/train_500.json", "2wikimultihopqa/train.json"), read_hotpot, True),
        }),
        DatasetSpec("adversarial_hotpotqa", "Adversarial HotpotQA: 2 gold + 2 adversarial paragraphs", {
            "dev": SplitSpec(("adversarial_hotpotqa/dev_308.json",), read_adversarial, True),
            "train": SplitSpec(("adversarial_hotpotqa/train_30.json",), read_adversarial, True),
        }),
        DatasetSpec("bamboogle", "Bamboogle: 2-hop open-domain questions", {
            "test": SplitSpec(("bamboogle/bamboogle_125.csv", "bamboogle/bamboogle.csv"), read_bamboogle_csv),
            "test-decomposed": SplitSpec(("bamboogle/bamboogle_125_with_decomposition.json",),
                                         read_bamboogle_json),
        }),
        DatasetSpec("freshqa", "FreshQA: time-sensitive and false-premise questions", {
            "test": SplitSpec(("freshqa/freshqa_600.csv", "freshqa/freshqa.csv"), read_freshqa, select="TEST"),
            "dev": SplitSpec(("freshqa/freshqa_600.csv", "freshqa/freshqa.csv"), read_freshqa, select="DEV"),
        }),
        DatasetSpec("fever", "FEVER claims (SUPPORTS / REFUTES / NOT ENOUGH INFO), HGOT's samples",
                    _hgot_splits("fever")),
        DatasetSpec("open_squad", "Open-SQuAD, HGOT's samples", _hgot_splits("open_squad")),
    ]
    return {spec.name: spec for spec in specs}


#: Every dataset by name (see the module docstring).
REGISTRY: dict[str, DatasetSpec] = _build_registry()


def _registry_key(name: str | Path) -> str | None:
    if isinstance(name, Path):
        return None
    key = str(name).strip().lower().replace("-", "_")
    return key if key in REGISTRY else None


def canonical_name(name: str) -> str:
    """The registry name of a dataset (``adversarial-hotpotqa`` -> ``adversarial_hotpotqa``)."""
    key = _registry_key(name)
    if key is None:
        raise DatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(REGISTRY)} (or the path of "
                           "a .jsonl / .json / .csv file of your own questions)")
    return key


def _split_name(name: str, split: str) -> str:
    """The registry name of a split of a (canonical) dataset."""
    key = str(split).strip().lower().replace("_", "-")
    splits = REGISTRY[name].splits
    if key not in splits:
        raise DatasetError(f"dataset {name!r} has no split {split!r}; its splits: {', '.join(splits)}")
    return key


_ROOT_NAMES = {"data-dir": "--data-dir", "env": "$HOPQA_DATA_DIR", "downloaded": "downloaded releases",
               "shipped": "shipped subsets"}


def _missing_file_error(name: str, split: str, roots: list[tuple[str, Path]]) -> DatasetFileNotFoundError:
    spec = REGISTRY[name].splits[split]
    looked = "; ".join(f"{_ROOT_NAMES[label]} {root}" for label, root in roots)
    files = ", ".join(spec.files)
    fetch = (f"fetch the official release with `hopqa datasets download {name}` (into the downloaded releases), "
             f"or copy the files into DIR/{name}/ and pass --data-dir DIR or set HOPQA_DATA_DIR=DIR"
             if name in OFFICIAL_SOURCES else
             f"{name} has no official download: copy its files into DIR/{name}/ and pass --data-dir DIR or set "
             "HOPQA_DATA_DIR=DIR")
    shipped = shipped_data_dir()
    broken = ("" if any(p.is_file() for p in candidates(shipped, spec.files)) else
              f" The shipped subset is missing from {shipped}: this hopqa installation is incomplete (reinstall it).")
    return DatasetFileNotFoundError(
        f"{name}/{split}: no data file found. Looked for {files} (each also as .gz) in, in this order: {looked}. "
        f"To provide it, {fetch}.{broken}"
    )


def resolve_split(name: str, split: str, data_dir: str | Path | None = None,
                  home: str | Path | None = None) -> tuple[str, Path]:
    """``(source label, file)`` serving a registered split; ``DatasetFileNotFoundError`` if
    no root holds it."""
    key = canonical_name(name)
    split_key = _split_name(key, split)
    roots = data_roots(data_dir, home)
    found = find_file(REGISTRY[key].splits[split_key].files, roots)
    if found is None:
        raise _missing_file_error(key, split_key, roots)
    return found


def split_path(name: str, split: str, data_dir: str | Path | None = None, home: str | Path | None = None) -> Path:
    """The file a split reads (see ``hopqa.datasets.paths`` for the search order)."""
    return resolve_split(name, split, data_dir, home)[1]


def _read(key: str, split_key: str, path: Path, stats: LoadStats, limit: int | None = None) -> Iterator[Example]:
    """The examples of one split's file, lazily (at most ``limit``), then a warning counting
    the skipped records when there were more than were warned about one by one."""
    spec = REGISTRY[key].splits[split_key]
    ctx = ReadContext(key, split_key, stats, spec.select)
    for example in itertools.islice(spec.reader(path, ctx), limit):
        example.dataset, example.split = key, split_key
        yield example
    stats.warn_total(str(path))


def load_dataset(name: str | Path, split: str = "dev", data_dir: str | Path | None = None,
                 limit: int | None = None, stats: LoadStats | None = None,
                 home: str | Path | None = None) -> list[Example]:
    """The examples of one split, normalised (see ``hopqa.datasets``).

    ``name`` is a registered dataset, or the path of a question file of your own (then
    ``split``, ``data_dir`` and ``home`` are ignored; see ``hopqa.datasets.generic``). The
    split's file is the first found in ``data_dir``, ``$HOPQA_DATA_DIR``, ``<home>/datasets``
    and the shipped subsets. ``limit`` keeps the first examples only; ``stats`` (optional)
    receives how many records were read and skipped. Raises ``DatasetError`` for an unknown
    dataset or split or a data directory that does not exist, ``DatasetFileNotFoundError`` for
    a missing file, and for a question file without one valid question.
    """
    return list(iter_dataset(name, split, data_dir, limit, stats, home))


def iter_dataset(name: str | Path, split: str = "dev", data_dir: str | Path | None = None,
                 limit: int | None = None, stats: LoadStats | None = None,
                 home: str | Path | None = None) -> Iterator[Example]:
    """``load_dataset`` as a stream: the examples one at a time, as the file is read, so a file
    of a million questions costs the memory of one (``hopqa eval`` answers from it at once).
    The dataset, split and file are checked when this is called (the same errors as
    ``load_dataset``); a question file without one valid question raises ``DatasetError`` when
    the stream ends."""
    if limit is not None and limit < 0:
        raise DatasetError(f"limit must be >= 0, not {limit}")
    stats = stats if stats is not None else LoadStats()
    if _registry_key(name) is None and is_question_file(name):
        return iter_question_file(name, limit=limit, stats=stats)
    key = canonical_name(str(name))
    split_key = _split_name(key, split)
    _, path = resolve_split(key, split_key, data_dir, home)
    return _read(key, split_key, path, stats, limit)


#: Files up to this size are counted before a run (for its progress bar); larger ones are not.
COUNT_MAX_BYTES = 64 * 2**20


def count_examples(name: str | Path, split: str = "dev", data_dir: str | Path | None = None,
                   limit: int | None = None, home: str | Path | None = None) -> int | None:
    """How many examples ``iter_dataset`` with these arguments gives, by reading the file once
    without warnings, when it is at most ``COUNT_MAX_BYTES``; None for a larger file (a stream
    of unknown length). Errors are ``iter_dataset``'s."""
    if _registry_key(name) is None and is_question_file(name):
        path = Path(str(name).strip()).expanduser()
    else:
        key = canonical_name(str(name))
        path = resolve_split(key, _split_name(key, split), data_dir, home)[1]
    if path.is_file() and path.stat().st_size > COUNT_MAX_BYTES:
        return limit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return sum(1 for _ in iter_dataset(name, split, data_dir, limit, LoadStats(), home))
        except DatasetError:  # no valid question: the run itself says so
            return 0


def load_shipped(name: str, split: str, limit: int | None = None, stats: LoadStats | None = None) -> list[Example]:
    """A split from the subsets shipped with hopqa only, whatever ``--data-dir``,
    ``$HOPQA_DATA_DIR`` or the downloads hold (for pinned inputs such as few-shot
    demonstrations); ``DatasetFileNotFoundError`` if the installation lacks it."""
    key = canonical_name(name)
    split_key = _split_name(key, split)
    roots = [("shipped", shipped_data_dir())]
    found = find_file(REGISTRY[key].splits[split_key].files, roots)
    if found is None:
        raise _missing_file_error(key, split_key, roots)
    return list(_read(key, split_key, found[1], stats if stats is not None else LoadStats(), limit))


@dataclass
class DatasetInfo:
    """One (dataset, split): the file that serves it, whether it exists, its number of
    examples and which root (``source``: data-dir, env, downloaded, shipped) it came from."""

    name: str
    split: str
    path: Path
    exists: bool
    size: int
    has_paragraphs: bool = False
    source: str = ""


def list_datasets(data_dir: str | Path | None = None, home: str | Path | None = None) -> list[DatasetInfo]:
    """Every registered (dataset, split) with the file that serves it and its size.

    A split no root holds is listed with ``exists=False``, ``size=0``, ``source=""`` and the
    path it would have in the first root searched.
    """
    roots = data_roots(data_dir, home)
    rows = []
    for name, dataset in REGISTRY.items():
        for split, spec in dataset.splits.items():
            found = find_file(spec.files, roots)
            if found is None:
                rows.append(DatasetInfo(name, split, roots[0][1] / spec.file, False, 0, spec.has_paragraphs))
                continue
            source, path = found
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DataWarning)
                size = sum(1 for _ in _read(name, split, path, LoadStats()))
            rows.append(DatasetInfo(name, split, path, True, size, spec.has_paragraphs, source))
    return rows


__all__ = ["REGISTRY", "DatasetInfo", "DatasetSpec", "SplitSpec", "canonical_name", "list_datasets",
           "load_dataset", "load_shipped", "resolve_split", "split_path"]
