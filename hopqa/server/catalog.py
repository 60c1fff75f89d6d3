"""``GET /v1/methods``: every registered method, the paper it implements, its options.

Each method is described as ``{"name", "doc", "paper", "retrieves", "options", "presets"}``: ``doc`` is the
line ``hopqa methods`` prints, ``paper`` the publication it implements (``PAPERS``: title,
authors, year; ``null`` for the plain baselines), ``retrieves`` whether it takes a retriever,
and ``options`` its config fields in order, each ``{"name", "type", "kind", "default",
"optional"}`` plus ``choices`` for a ``Literal`` field and ``range`` (``[low, high]``, ``null``
for no bound) where one is declared (the field's metadata or the table of ranges by option name
in ``hopqa.methods.base``; every numeric option has one, finite; a list of numbers such as
ToR's ``widths`` has its items' range and ``"items": "int"``). ``kind`` is ``hopqa.options``'s:
``bool``, ``int``, ``float``, ``str``, ``choice`` or ``any``. Defaults are the name's preset's
(``gensco-stop`` says ``variant: "stop"``). A resource option says what it names, ``"resource":
"dataset" | "directory" | "model" | "url"``. Given the service's settings (``catalog(default,
settings)``), an option the service caps has ``"cap"`` (``ServiceSettings.option_caps``) and a
resource option lists the names a client may give it, ``"allowed"`` (empty for a directory).
``presets`` maps each of the method's presets (``hopqa.methods.base.Preset``) to ``{"options",
"doc"}``: a request sets one with ``"preset"`` among its options.

``resource_options`` and ``numeric_options`` name those options across every registered method
(``hopqa serve`` checks its ``--allow-option`` and ``--cap`` against them).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

from hopqa.methods.base import METHODS, get_method_class, method_config, option_range
from hopqa.options import field_kind, resource_fields

if typing.TYPE_CHECKING:
    from hopqa.server.settings import ServiceSettings

#: The publication each method implements: title, first author's surname "et al." (or the
#: authors), year. Titles as the papers print them.
PAPERS: dict[str, dict[str, Any]] = {
    "hgot": {"title": "HGOT: Hierarchical Graph of Thoughts for Retrieval-Augmented In-Context Learning in "
                      "Factuality Evaluation", "authors": "Fang et al.", "year": 2024},
    "gensco": {"title": "GenSco: Can Question Decomposition based Passage Alignment improve Question Answering?",
               "authors": "Fazili et al.", "year": 2024},
    "self-dc": {"title": "Self-DC: When to Retrieve and When to Generate? Self Divide-and-Conquer for "
                         "Compositional Unknown Questions", "authors": "Wang et al.", "year": 2024},
    "tor": {"title": "Tree of Reviews: A Tree-based Dynamic Iterative Retrieval Framework for Multi-hop Question "
                     "Answering", "authors": "Li et al.", "year": 2024},
    "leapquery": {"title": "LeapQuery: Enhancing Multi-Hop Question Answering",
                  "authors": "Roy, Shroff, Matta and Liao", "year": 2024},
    "self-ask": {"title": "Measuring and Narrowing the Compositionality Gap in Language Models",
                 "authors": "Press et al.", "year": 2023},
    "react": {"title": "ReAct: Synergizing Reasoning and Acting in Language Models", "authors": "Yao et al.",
              "year": 2023},
    "ircot": {"title": "Interleaving Retrieval with Chain-of-Thought Reasoning for Knowledge-Intensive Multi-Step "
                       "Questions", "authors": "Trivedi et al.", "year": 2023},
    "iter-retgen": {"title": "Enhancing Retrieval-Augmented Large Language Models with Iterative "
                             "Retrieval-Generation Synergy", "authors": "Shao et al.", "year": 2023},
    "genread": {"title": "Generate rather than Retrieve: Large Language Models are Strong Context Generators",
                "authors": "Yu et al.", "year": 2023},
    "cot": {"title": "Large Language Models are Zero-Shot Reasoners", "authors": "Kojima et al.", "year": 2022},
}
#: Registered names that implement another name's paper (presets and baselines of a paper).
PAPER_OF: dict[str, str] = {"gensco-max": "gensco", "gensco-stop": "gensco", "gensco-no-qd": "gensco",
                            "cor": "tor"}


def paper(name: str) -> dict[str, Any] | None:
    """The publication the method registered as ``name`` implements, or None."""
    found = PAPERS.get(PAPER_OF.get(name, name))
    return dict(found) if found is not None else None


def type_name(annotation: Any) -> str:
    """A field's type as written in Python: ``int``, ``int | None``, ``Literal['a', 'b']``."""
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


def _plain(value: Any) -> Any:
    """``value`` as JSON reads it back (tuples as lists, other objects as text)."""
    return json.loads(json.dumps(value, default=str))


def describe_options(name: str, settings: ServiceSettings | None = None) -> list[dict[str, Any]]:
    """The config fields of the method registered as ``name`` (module docstring)."""
    config_cls = get_method_class(name).Config
    defaults = method_config(name)
    hints = typing.get_type_hints(config_cls)
    resources = resource_fields(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        annotation = hints.get(f.name, Any)
        kind = field_kind(config_cls, f.name)
        args = typing.get_args(annotation)
        item: dict[str, Any] = {"name": f.name, "type": type_name(annotation), "kind": kind,
                                "default": _plain(getattr(defaults, f.name)),
                                "optional": type(None) in args or None in _choices(annotation)}
        if kind == "choice":
            item["choices"] = [c for c in _choices(annotation) if c is not None]
        numeric = kind in ("int", "float") or f.metadata.get("items") == "int"
        if numeric:
            bounds = option_range(config_cls, f.name)
            if bounds is not None:
                item["range"] = list(bounds)
            if f.metadata.get("above") is not None:
                item["above"] = f.metadata["above"]
            if f.metadata.get("items") is not None:
                item["items"] = f.metadata["items"]
            if settings is not None and f.name in settings.option_caps:
                item["cap"] = settings.option_caps[f.name]
        if f.metadata.get("needs"):  # acts only with that option on (a preset's value goes with it)
            item["needs"] = f.metadata["needs"]
        if f.name in resources:
            item["resource"] = resources[f.name]
            if settings is not None:
                item["allowed"] = [] if resources[f.name] == "directory" else \
                    list(settings.allowed_names.get(f.name, ()))
        out.append(item)
    return out


def resource_options() -> dict[str, str]:
    """Every resource option of every registered method, name -> what it names (imports them all)."""
    return {key: what for name in METHODS for key, what in resource_fields(get_method_class(name).Config).items()}


def numeric_options() -> set[str]:
    """The names of every numeric option (a number or a list of numbers) of every registered method."""
    return {f.name for name in METHODS for f in dataclasses.fields(get_method_class(name).Config)
            if field_kind(get_method_class(name).Config, f.name) in ("int", "float") or f.metadata.get("items")}


def _choices(annotation: Any) -> tuple[Any, ...]:
    """The choices of a ``Literal`` (or of the ``Literal`` in ``Literal[...] | None``)."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    return ()


def describe_method(name: str, settings: ServiceSettings | None = None) -> dict[str, Any]:
    cls = get_method_class(name)
    return {"name": name, "doc": METHODS.doc(name), "paper": paper(name), "retrieves": "retriever" in cls.components,
            "options": describe_options(name, settings),
            "presets": {key: {"options": _plain(p.options), "doc": p.doc} for key, p in sorted(cls.presets.items())}}


def catalog(default_method: str, settings: ServiceSettings | None = None) -> dict[str, Any]:
    """``{"default": the service's default method, "methods": [every method, by name]}``; with
    ``settings``, the service's caps and allowed names too (module docstring)."""
    return {"default": default_method, "methods": [describe_method(name, settings) for name in sorted(METHODS)]}
