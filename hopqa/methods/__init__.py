"""Methods, one module each, registered by name (see ``hopqa.methods.base``).

Importing ``hopqa.methods`` imports no method: the registry ``METHODS`` imports a method's
module when its class is first asked for (``build_method``, ``get_method_class``,
``METHODS[name]``). ``hopqa.methods.<module>`` still works as an attribute (imported then).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from hopqa.methods.base import (
    BUILTIN_METHODS,
    METHODS,
    Method,
    MethodConfig,
    MethodError,
    Result,
    build_method,
    get_method_class,
)

__all__ = ["METHODS", "Method", "MethodConfig", "MethodError", "Result", "build_method", "get_method_class"]

_MODULES = frozenset(module.rpartition(".")[2] for module in BUILTIN_METHODS.values())


def __getattr__(name: str) -> ModuleType:
    """``hopqa.methods.hgot`` and the like, imported on first access (PEP 562)."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
