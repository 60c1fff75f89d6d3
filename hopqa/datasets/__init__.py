"""Benchmark loaders: every dataset file normalised to one ``Example`` type.

Three lines::

    from hopqa.datasets import load_dataset
    examples = load_dataset("musique", "dev")              # the shipped 200-question subset
    mine = load_dataset("path/to/my_questions.jsonl")      # your own questions

Modules
    ``registry``  the datasets, their splits and files; ``load_dataset``, ``list_datasets``
    ``paths``     where data is found: --data-dir, $HOPQA_DATA_DIR, <home>/datasets, shipped
    ``records``   JSON / JSON-lines / CSV records (``.gz`` too) and the one skip-and-count loop
    ``musique``, ``hotpot`` (HotpotQA, 2Wiki, Adversarial HotpotQA), ``bamboogle``,
    ``freshqa``, ``hgot`` (HGOT's FEVER / Open-SQuAD / HotpotQA samples): one reader per family
    ``generic``   the question-file format for your own data
    ``download``  the official releases and ``download_dataset``
    ``demos``     few-shot demonstrations from the shipped train subsets (``few_shot_demos``,
                  ``answer_demos``)

Where data is found
    Per (dataset, split), the first of these roots holding one of the split's files wins: the
    ``data_dir`` argument (``--data-dir``), ``$HOPQA_DATA_DIR``, the official releases
    downloaded into ``<home>/datasets``, and the subsets shipped in ``hopqa/data`` (always
    there, gzip-compressed; see ``hopqa/data/LICENSES.md``). So every split loads with no
    setup, and a folder holding only ``musique/`` overrides MuSiQue alone.

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
    line never stops a load. Unknown datasets and splits, a ``--data-dir`` that does not exist
    and missing files raise ``DatasetError`` with the known names, or where the loader looked
    and how to provide the data.
"""

from __future__ import annotations

from hopqa.datasets.demos import (
    ANSWER_DEMO_DATASETS,
    DemosUnavailableError,
    answer_demos,
    few_shot_demos,
)
from hopqa.datasets.download import OFFICIAL_SOURCES, Download, download_dataset
from hopqa.datasets.generic import FILE_SPLIT, is_question_file, iter_question_file, load_question_file
from hopqa.datasets.paths import SOURCES, data_roots, downloads_dir, shipped_data_dir
from hopqa.datasets.records import (
    DatasetError,
    DatasetFileNotFoundError,
    DataWarning,
    LoadStats,
    iter_paragraphs,
)
from hopqa.datasets.registry import (
    REGISTRY,
    DatasetInfo,
    DatasetSpec,
    SplitSpec,
    canonical_name,
    count_examples,
    iter_dataset,
    list_datasets,
    load_dataset,
    load_shipped,
    resolve_split,
    split_path,
)

__all__ = [
    "ANSWER_DEMO_DATASETS",
    "FILE_SPLIT",
    "OFFICIAL_SOURCES",
    "REGISTRY",
    "SOURCES",
    "DataWarning",
    "DatasetError",
    "DatasetFileNotFoundError",
    "DatasetInfo",
    "DatasetSpec",
    "DemosUnavailableError",
    "Download",
    "LoadStats",
    "SplitSpec",
    "answer_demos",
    "canonical_name",
    "data_roots",
    "download_dataset",
    "downloads_dir",
    "few_shot_demos",
    "is_question_file",
    "iter_paragraphs",
    "list_datasets",
    "load_dataset",
    "load_question_file",
    "iter_question_file",
    "iter_dataset",
    "count_examples",
    "load_shipped",
    "resolve_split",
    "shipped_data_dir",
    "split_path",
]
