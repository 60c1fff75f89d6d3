"""The method registry imports a method's module only when that method is used (issue 14: every
command paid for every method, HGOT's networkx included), and its table of built-in methods
agrees with the ``@register`` decorators."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import hopqa.methods
from hopqa.methods.base import (
    BUILTIN_METHODS,
    METHODS,
    MethodRegistry,
    get_method_class,
)

METHODS_DIR = Path(hopqa.methods.__file__).parent


def run_python(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_builtin_table_matches_the_register_decorators():
    """Every ``@register("name")`` in hopqa/methods is in ``BUILTIN_METHODS`` with its module."""
    found = {}
    for path in sorted(METHODS_DIR.rglob("*.py")):
        module = ".".join(path.relative_to(METHODS_DIR).with_suffix("").parts)
        for name in re.findall(r'^@register\("([^"]+)"', path.read_text(encoding="utf-8"), re.MULTILINE):
            found[name] = f"hopqa.methods.{module}"
    assert found == BUILTIN_METHODS


def test_importing_hopqa_methods_imports_no_method():
    run_python("import sys\n"
               "import hopqa.methods\n"
               "from hopqa.methods import METHODS, get_method_class\n"
               "names = sorted(METHODS)\n"
               "assert 'hgot' in METHODS and 'self-ask' in names and len(METHODS) == len(names), names\n"
               "loaded = [m for m in sys.modules if m.startswith('hopqa.methods.') and m != 'hopqa.methods.base']\n"
               "assert not loaded, loaded\n"
               "assert 'networkx' not in sys.modules\n")


def test_getting_a_method_imports_its_module_only():
    run_python("import sys\n"
               "from hopqa.methods import get_method_class\n"
               "cls = get_method_class('Direct')\n"
               "assert cls.__module__ == 'hopqa.methods.direct' and cls.name == 'direct'\n"
               "assert 'hopqa.methods.hgot' not in sys.modules and 'networkx' not in sys.modules\n"
               "assert 'hopqa.methods.gensco' not in sys.modules\n")


def test_every_registered_name_resolves_to_its_class():
    for name, module in BUILTIN_METHODS.items():
        cls = METHODS[name]
        assert cls.__module__ == module
        assert cls.name == name or METHODS.preset(name), name  # a preset names a class registered under another name
        assert get_method_class(name.replace("-", "_").upper()) is cls
    assert dict(METHODS.items()).keys() == BUILTIN_METHODS.keys() | set(METHODS.loaded())


def test_module_attributes_still_work():
    assert hopqa.methods.direct.Direct is METHODS["direct"]
    assert hopqa.methods.gensco.__name__ == "hopqa.methods.gensco"
    with pytest.raises(AttributeError):
        hopqa.methods.no_such_module  # noqa: B018


def test_registry_mapping_behaviour():
    reg = MethodRegistry({"direct": "hopqa.methods.direct"})
    assert list(reg) == ["direct"] and len(reg) == 1 and "direct" in reg and reg.loaded() == []

    class Custom(hopqa.methods.Method):
        name = "custom"

    reg["custom"] = Custom
    assert sorted(reg) == ["custom", "direct"] and reg["custom"] is Custom
    with pytest.raises(KeyError):
        reg["nope"]
    del reg["custom"]
    assert list(reg) == ["direct"]
    with pytest.raises(KeyError):
        del reg["custom"]
    broken = MethodRegistry({"ghost": "hopqa.methods.direct"})  # the module does not register it
    with pytest.raises(KeyError, match="did not register"):
        broken["ghost"]


def test_unknown_method_lists_every_name_without_importing():
    with pytest.raises(hopqa.methods.MethodError, match="available: cor, cot, direct, genread"):
        get_method_class("nonexistent")
