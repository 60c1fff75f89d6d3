"""The documentation: the site builds with ``mkdocs build --strict`` (every page in the nav, no
broken link or anchor, the API reference generated from the docstrings), and the README — short,
the two commands first — links only to pages and anchors that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _missing_mkdocs() -> str | None:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed (pip install -e '.[dev]' installs mkdocs, its theme and mkdocstrings)"
    return None


@pytest.mark.skipif(_missing_mkdocs() is not None, reason=_missing_mkdocs() or "")
def test_the_site_builds_strictly(tmp_path):
    """A broken link, a missing anchor, a page outside the nav or a docstring the reference
    cannot render fails the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    assert "hopqa.pipeline" in reference and "evaluate" in reference  # generated from the docstrings


def _headings(path: Path) -> set[str]:
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(m.group(1), "-") for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 250
    heads = [line for line in lines if line.startswith("## ")]
    assert heads[0] == "## The two commands"
    first = text.index("make demo ")
    assert first < text.index("make test ") < text.index("## ", text.index("## The two commands") + 3)


def test_every_readme_link_reaches_a_page_and_its_anchor():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert len(links) > 10
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), f"the README links to {path}, which does not exist"
        if anchor:
            assert anchor in _headings(target), f"{path} has no heading for #{anchor}"


def test_make_screenshots_pictures_do_not_fail_the_clean_checkout_check(monkeypatch):
    """The suite fails when it leaves the checkout changed, except for the PNG files of the folder
    ``make screenshots`` asks the browser test to draw into (``HOPQA_SCREENSHOTS=docs``): a
    rewritten picture there is what that run is for; any other change still counts."""
    from conftest import _asked_picture

    monkeypatch.delenv("HOPQA_SCREENSHOTS", raising=False)
    assert not _asked_picture(" M docs/hgot-plan.png")
    monkeypatch.setenv("HOPQA_SCREENSHOTS", "docs")
    assert _asked_picture(" M docs/hgot-plan.png") and _asked_picture("?? docs/new-view.png")
    assert not _asked_picture(" M docs/index.md")
    assert not _asked_picture(" M docs/benchmarks/intervals-differences.png")  # another folder: drawn by doc_tables
    assert not _asked_picture(" M hopqa/server/static/app.js")
