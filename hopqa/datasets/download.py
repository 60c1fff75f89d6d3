"""Official releases: where they are and how ``download_dataset`` fetches them.

``OFFICIAL_SOURCES`` lists, per dataset, the files of its official release (``Download``: URL,
saved name, zip members to extract). ``download_dataset`` streams each into
``<dest_dir>/<dataset>/`` through ``<name>.part`` (renamed when complete, removed on any
failure, so no partial file is left behind), with a tqdm byte progress bar, extracts the named
zip members and removes the archive. ``dest_dir`` defaults to ``<home>/datasets``, which the
loader searches (see ``hopqa.datasets.paths``). No network is a ``RuntimeError`` beginning
"no network: " that says how to place the files by hand.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from hopqa.console import progress_bar
from hopqa.datasets.paths import downloads_dir
from hopqa.datasets.records import DatasetError


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


def _data_dirs(target: Path) -> str:
    return f"DATA_DIR = {target.parent.parent}, or any folder passed as --data-dir or HOPQA_DATA_DIR"


def _fetch(url: str, target: Path, timeout: float, name: str, progress: bool = True) -> None:
    """Stream ``url`` into ``target`` (via ``target.part``); RuntimeError if it cannot. (``urllib``
    and ``http.client`` are imported here, not with the module: every command that reads a
    dataset imports this module, and they cost ~30 ms of its start.)"""
    import http.client
    import urllib.error
    import urllib.request

    network_errors = (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException)
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
            bar = progress_bar(total, target.name, enabled=progress, unit="B", unit_scale=True, unit_divisor=1024)
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
            f"hand and put it in DATA_DIR/{name}/{target.name} ({_data_dirs(target)})"
        ) from exc
    except network_errors as exc:
        part.unlink(missing_ok=True)
        reason = getattr(exc, "reason", exc)
        raise RuntimeError(
            f"no network: put the files in DATA_DIR/{name}/ by hand ({_data_dirs(target)}), "
            f"or retry where the internet is reachable (could not reach {url}: {reason})"
        ) from exc
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(target)


def _extract(archive: Path, members: tuple[tuple[str, str], ...], out_dir: Path) -> list[Path]:
    """Save the named members of a zip (matched by base name) into ``out_dir``."""
    import zipfile

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


def download_dataset(name: str, dest_dir: str | Path | None = None, timeout: float = 60.0, progress: bool = True,
                     home: str | Path | None = None) -> list[Path]:
    """Download a dataset's official release into ``dest_dir/<name>/``; the paths written.

    ``dest_dir`` defaults to ``<home>/datasets`` (home = ``home`` / ``$HOPQA_HOME`` /
    ``~/.cache/hopqa``), the ``downloaded`` root that ``load_dataset`` searches after
    ``--data-dir`` and ``$HOPQA_DATA_DIR`` and before the shipped subsets.

    Sources (``OFFICIAL_SOURCES``): MuSiQue from the Google Drive file of StonyBrookNLP/musique
    (the ``musique_ans_v1.0_{dev,train}.jsonl`` members of the zip); HotpotQA
    ``hotpot_dev_distractor_v1.json`` and ``hotpot_train_v1.1.json`` from curtis.ml.cmu.edu
    (JSON lists, which the HotpotQA reader accepts); 2WikiMultihopQA ``dev.json`` and
    ``train.json`` from the Dropbox release linked by Alab-NII/2wikimultihop; Bamboogle's CSV
    from the ofirpress/self-ask repository; FreshQA's CSV export of the Google Sheet that
    freshllms/freshqa links. The files keep their official names, which the registry lists
    after the shipped subsets' names, so ``load_dataset(name, split)`` reads them (from the
    default ``dest_dir``; else pass ``data_dir=dest_dir``) with the same split names.

    Gaps against the shipped subsets: the official files are the full sets (thousands of
    questions, the loader reads them all); official 2Wiki train has no ``qa_pairs`` /
    ``explanation`` (those come from the MIGRES preprocessing), so no decomposition; FreshQA
    answers change weekly. Adversarial HotpotQA, Bamboogle's decomposition and the HGOT samples
    (FEVER, Open-SQuAD, HotpotQA ``hgot-*``) are third-party files with no official download:
    copy them by hand. Uses ``urllib`` with ``timeout`` seconds per network operation and a
    tqdm progress bar when tqdm is installed and ``progress`` is true; raises ``RuntimeError`` ("no network: ...") when
    a source cannot be reached, leaving no partial file behind.
    """
    from hopqa.datasets.registry import (
        canonical_name,  # the registry imports this module
    )

    key = canonical_name(name)
    if key not in OFFICIAL_SOURCES:
        raise DatasetError(f"no official download for {key!r}: copy its files into DATA_DIR/{key}/ by hand and "
                           f"pass --data-dir DATA_DIR (the shipped subset is used meanwhile); downloadable: "
                           f"{', '.join(OFFICIAL_SOURCES)}")
    root = Path(dest_dir).expanduser() if dest_dir is not None else downloads_dir(home)
    out_dir = root / key
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for source in OFFICIAL_SOURCES[key]:
        target = out_dir / source.filename
        _fetch(source.url, target, timeout, key, progress)
        if source.extract:
            written.extend(_extract(target, source.extract, out_dir))
            target.unlink()
        else:
            written.append(target)
    return written
