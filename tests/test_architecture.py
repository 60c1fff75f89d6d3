"""The layers of hopqa (``.importlinter``; README "Layout") hold: a cycle or an upward import fails."""

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
