"""Methods, one module each, registered by name (see ``hopqa.methods.base``).

Importing ``hopqa.methods`` imports no method: the registry ``METHODS`` imports a method's
module when its class is first asked for (``get_method_class``, ``METHODS[name]``,
``instantiate``). ``hopqa.methods.<module>`` still works as an attribute (imported then).
HGOT and GenSco are packages (``methods/hgot/``: the algorithm, the equations, the plan graph,
the prompts, the demonstrations). Methods are built with their components by ``hopqa.build``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from hopqa.methods.base import (
    BUILTIN_METHODS,
    METHODS,
    FewShotMethod,
    Method,
    MethodConfig,
    MethodError,
    Result,
    RetrievingMethod,
    get_method_class,
    instantiate,
    method_config,
)

__all__ = ["METHODS", "FewShotMethod", "Method", "MethodConfig", "MethodError", "Result", "RetrievingMethod",
           "get_method_class", "instantiate", "method_config"]

_MODULES = frozenset(module.split(".")[2] for module in BUILTIN_METHODS.values())  # hopqa.methods.<this>[...]


def __getattr__(name: str) -> ModuleType:
    """``hopqa.methods.hgot`` and the like, imported on first access (PEP 562)."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
