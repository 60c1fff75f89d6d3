"""The layers of hopqa (``.importlinter``; docs/architecture.md "Layout") hold: a cycle or an upward import fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    # importlinter's own entry point, with the interpreter running the tests.
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--config", str(config), "--no-cache", "--no-logo"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_layer_contracts_are_kept():
    r = lint_imports(ROOT / ".importlinter")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The checker sees hopqa's imports: the LLM layer imports the trace, so a contract putting
    the trace above the LLM layer must be reported broken."""
    config = tmp_path / "inverted.ini"
    config.write_text("[importlinter]\nroot_package = hopqa\n\n"
                      "[importlinter:contract:inverted]\nname = inverted\ntype = layers\n"
                      "layers =\n    hopqa.trace\n    hopqa.llm\n")
    r = lint_imports(config)
    assert r.returncode != 0 and "BROKEN" in r.stdout and "hopqa.llm" in r.stdout, r.stdout + r.stderr


def _docs_layout() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("## Layout\n")
    return text[start: text.find("\n## ", start + 1)]


def test_the_docs_layout_names_every_module_and_every_layer():
    """The Layout section matches the tree: each module (by file name) and each package appears,
    and the layer diagram lists the layers of .importlinter in the same order."""
    layout = _docs_layout()
    package = ROOT / "hopqa"
    missing = [str(p.relative_to(ROOT)) for p in sorted(package.rglob("*.py"))
               if p.name != "__init__.py" and p.name not in layout]
    missing += [f"{p.relative_to(ROOT)}/" for p in sorted(package.iterdir())
                if p.is_dir() and (p / "__init__.py").exists() and f"{p.name}/" not in layout]
    assert missing == []
    contract = (ROOT / ".importlinter").read_text(encoding="utf-8").split("layers =\n", 1)[1].split("\n\n", 1)[0]
    layers = [line.strip() for line in contract.splitlines() if line.strip()]
    drawn = [line.split("  ")[0].strip() for line in layout.splitlines() if line.startswith("hopqa.")]
    assert drawn == layers
