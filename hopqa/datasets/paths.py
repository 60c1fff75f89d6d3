"""Where benchmark data is found: four roots, searched per split, first match wins.

For each (dataset, split) the loader looks in these roots, in this order, and uses the first
root that holds one of the split's candidate files (``<root>/<rel>`` or ``<root>/<rel>.gz``,
for each ``rel`` of ``SplitSpec.files`` in order):

1. ``data-dir``: the explicit ``data_dir`` argument (``--data-dir``);
2. ``env``: the directory named by ``$HOPQA_DATA_DIR`` (read by ``hopqa.config``);
3. ``downloaded``: official releases fetched by ``download_dataset`` into
   ``<home>/datasets`` (home = ``--home`` / ``$HOPQA_HOME`` / ``~/.cache/hopqa``; looking
   does not create it);
4. ``shipped``: the subsets installed with hopqa in ``hopqa/data`` (gzip-compressed).

The search is per split, so a directory holding only ``musique/`` serves MuSiQue and leaves
every other dataset to the later roots. An explicit or ``$HOPQA_DATA_DIR`` directory that does
not exist is an error (a typo must not fall back silently to the shipped subsets).
"""

from __future__ import annotations

from pathlib import Path

from hopqa import config
from hopqa.datasets.records import DatasetError

#: The root labels, in search order.
SOURCES = ("data-dir", "env", "downloaded", "shipped")

_SHIPPED = Path(__file__).resolve().parent.parent / "data"


def shipped_data_dir() -> Path:
    """The folder of the subsets shipped with hopqa (``hopqa/data``, files gzip-compressed)."""
    return _SHIPPED


def downloads_dir(home: str | Path | None = None) -> Path:
    """Where ``download_dataset`` puts official releases by default: ``<home>/datasets``
    (not created here)."""
    return config.default_home(home, create=False) / "datasets"


def _user_dir(value: str | Path | None, what: str) -> Path | None:
    if value is None or not str(value).strip():
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise DatasetError(
            f"the data directory {path} ({what}) does not exist: point it at the folder that holds "
            "musique/, hotpotqa/, ..., or leave it unset to use the downloaded releases and the shipped subsets"
        )
    return path


def data_roots(data_dir: str | Path | None = None, home: str | Path | None = None) -> list[tuple[str, Path]]:
    """The roots searched for a split's file, in order, as ``(source label, root)``.

    ``data-dir`` and ``env`` appear only when given (and must exist); ``downloaded`` and
    ``shipped`` always appear, existing or not, so that errors can say where the loader looked.
    An empty ``data_dir`` counts as not given.
    """
    roots: list[tuple[str, Path]] = []
    explicit = _user_dir(data_dir, "--data-dir")
    if explicit is not None:
        roots.append(("data-dir", explicit))
    env = _user_dir(config.data_dir_from_env(), f"${config.DATA_DIR_ENV}")
    if env is not None and all(env.resolve() != root.resolve() for _, root in roots):
        roots.append(("env", env))
    roots.append(("downloaded", downloads_dir(home)))
    roots.append(("shipped", shipped_data_dir()))
    return roots


def candidates(root: Path, files: tuple[str, ...]) -> list[Path]:
    """The paths a split may have under ``root``: each ``rel``, then ``rel.gz``."""
    return [root / name for rel in files for name in (rel, f"{rel}.gz")]


def find_file(files: tuple[str, ...], roots: list[tuple[str, Path]]) -> tuple[str, Path] | None:
    """``(source label, path)`` of the first existing candidate in the first root holding one."""
    for label, root in roots:
        for path in candidates(root, files):
            if path.is_file():
                return label, path
    return None
