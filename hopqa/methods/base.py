"""What every method is: a class with a typed config and ``answer(question) -> Answer``.

``Method.answer`` validates the question, opens the trace and the usage account, runs the
method's ``run`` and packs the result. A method talks to the world only through ``self.llm``
(a traced LLM) and the retriever it is given (traced too), so every call lands in the trace
and the usage. Errors never escape ``answer``: they come back as ``Answer.error`` with the
partial trace (a batch of ten thousand questions must not stop on one); ``answer_or_raise``
is the strict variant.

Methods register themselves by name (``@register("retrieve-then-read")``); CLI names are
lowercase with hyphens, underscores accepted as aliases. The registry ``METHODS`` knows the
built-in methods' names and modules (``BUILTIN_METHODS``) without importing them: a method's
module is imported when its class is first asked for (``METHODS[name]``, ``get_method_class``,
``build_method``), so a command pays only for the methods it uses (HGOT alone imports
networkx; every method together took ~0.25 s of start-up). Listing the names imports nothing.

Options: every config field is checked in one place, ``check_option``, whenever a config is
made or changed (``MethodConfig.__post_init__`` and ``update``): its type (a whole number for an
``int`` field, a finite number for a ``float``, ``true``/``false`` for a ``bool``) and, for a
number, its range: ``field(metadata={"range": (low, high)})`` on the field if given, else
``OPTION_RANGES`` by field name (one table for every method: a name means the same in each),
else whole numbers must be at least 0. ``parse_option`` turns the text of ``--set KEY=VALUE``
into the field's type and checks it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import numbers
import time
import types
import typing
from collections.abc import Iterator, MutableMapping
from dataclasses import Field, asdict, dataclass, fields
from typing import Any, ClassVar

from hopqa.config import FALSE_WORDS, MAX_QUESTION_CHARS, TRUE_WORDS
from hopqa.llm.base import LLMBase
from hopqa.retrieval.base import Retriever
from hopqa.runtime import TracedRetriever, accounting, traced_llm, traced_retriever
from hopqa.trace import Trace
from hopqa.types import Answer, Passage, Usage


class MethodError(ValueError):
    """Bad input to a method (empty or huge question, missing retriever, bad option)."""


#: Allowed values of numeric options by field name: ``(low, high)``, both inclusive, ``None`` for
#: no bound. Counts of something a method does or uses at least once are >= 1; counts that may
#: be 0 say so. A field's own ``metadata={"range": ...}`` takes precedence.
OPTION_RANGES: dict[str, tuple[float | None, float | None]] = {
    # at least one
    "k": (1, None),  # passages per retrieval
    "max_tokens": (1, None),  # tokens per generated answer or step
    "document_tokens": (1, None),  # tokens per generated document (GenRead, Self-DC)
    "n_documents": (1, None),  # generated documents (GenRead)
    "samples": (1, None),  # sampled thoughts per step (HGOT)
    "iterations": (1, None),  # retrieval-generation rounds (Iter-RetGen)
    "max_steps": (1, None),  # reasoning steps (IRCoT, ReAct, Self-Ask, HGOT plan)
    "max_levels": (1, None),  # sub-question levels (GenSco)
    "stop_from_level": (1, None),  # first level the STOP test is applied at (GenSco)
    "max_paragraphs": (1, None),  # paragraphs kept (IRCoT)
    "max_subquestions": (1, None),  # sub-questions per decomposition (Self-DC)
    "max_passage_words": (1, None),  # words shown per passage
    "scorer_passage_words": (1, None),
    "total_passage_words": (1, None),  # words of all passages in a prompt
    "observation_sentences": (1, None),  # sentences per observation (ReAct)
    "bootstrap_examples": (1, None),  # training examples run to bootstrap demonstrations (HGOT)
    # zero allowed
    "shots": (0, None),  # few-shot demonstrations per prompt (0: zero-shot)
    "num_demos": (0, None),  # bootstrapped demonstrations per prompt (HGOT)
    "depth": (0, None),  # decomposition depth limit (0: answer without decomposing)
    "seed": (0, None),
    # sampling (the OpenAI API's ranges)
    "temperature": (0.0, 2.0),
    "document_temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    # weights, thresholds and confidence bounds in [0, 1] (HGOT's Eq. 7-8, Self-DC's alpha and beta)
    "alpha": (0.0, 1.0),
    "beta": (0.0, 1.0),
    "gamma": (0.0, 1.0),
    "w1": (0.0, 1.0),
    "w2": (0.0, 1.0),
    "w3": (0.0, 1.0),
    "stop_similarity": (-1.0, 1.0),  # a cosine similarity (HGOT)
}
#: The range of an ``int`` field found neither in its metadata nor in ``OPTION_RANGES``.
DEFAULT_INT_RANGE: tuple[float | None, float | None] = (0, None)


def _field_kind(annotation: Any) -> tuple[type | None, bool]:
    """``(bool | int | float | str | None, whether None is allowed)`` of a field's type."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    optional = type(None) in args
    for kind in (bool, int, float, str):
        if kind in args:
            return kind, optional
    return None, optional


def option_range(f: Field[Any]) -> tuple[float | None, float | None] | None:
    """The allowed ``(low, high)`` of a numeric field (see the module docstring), or None."""
    if "range" in f.metadata:
        return tuple(f.metadata["range"])  # type: ignore[return-value]
    return OPTION_RANGES.get(f.name)


def _describe(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"between {low} and {high}"
    return f"at least {low}" if low is not None else f"at most {high}"


def check_option(config_cls: type[MethodConfig], name: str, value: Any) -> None:
    """Raise ``MethodError`` unless ``value`` suits the option ``name`` (type and range)."""
    f = _fields_of(config_cls).get(name)
    if f is None:
        raise MethodError(f"{config_cls.__name__} has no option {name!r} "
                          f"(options: {', '.join(sorted(_fields_of(config_cls)))})")
    kind, optional = _field_kind(_hints_of(config_cls).get(name))
    if value is None:
        if optional or kind is None:
            return
        raise MethodError(f"option {name} needs a value")
    if kind is bool and not isinstance(value, bool):
        raise MethodError(f"option {name} must be true or false, not {value!r}")
    if kind is int and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        raise MethodError(f"option {name} must be a whole number, not {value!r}")
    if kind is float and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                          or not math.isfinite(value)):
        raise MethodError(f"option {name} must be a finite number, not {value!r}")
    if kind is str and not isinstance(value, str):
        raise MethodError(f"option {name} must be text, not {value!r}")
    if kind in (int, float):
        low, high = option_range(f) or (DEFAULT_INT_RANGE if kind is int else (None, None))
        if (low is not None and value < low) or (high is not None and value > high):
            raise MethodError(f"option {name} must be {_describe(low, high)}, not {value!r}")


def parse_option(config_cls: type[MethodConfig], name: str, text: str) -> Any:
    """The value of option ``name`` written as ``text`` (``--set name=text``), converted to the
    field's type and checked; ``none`` (or nothing) unsets an optional field."""
    if name not in _fields_of(config_cls):
        check_option(config_cls, name, None)  # raises: unknown option
    kind, optional = _field_kind(_hints_of(config_cls).get(name))
    word = text.strip()
    value: Any = word
    if optional and word.lower() in ("", "none", "null"):
        value = None
    elif kind is bool:
        if word.lower() not in TRUE_WORDS + FALSE_WORDS:
            raise MethodError(f"option {name} must be true or false, not {text!r}")
        value = word.lower() in TRUE_WORDS
    elif kind in (int, float):
        try:
            value = kind(word)
        except ValueError:
            noun = "a whole number" if kind is int else "a number"
            raise MethodError(f"option {name} must be {noun}, not {text!r}") from None
    elif kind is str:
        value = text
    check_option(config_cls, name, value)
    return value


@functools.cache
def _fields_of(config_cls: type[MethodConfig]) -> dict[str, Field[Any]]:
    return {f.name: f for f in fields(config_cls)}


@functools.cache
def _hints_of(config_cls: type[MethodConfig]) -> dict[str, Any]:
    return typing.get_type_hints(config_cls)


@dataclass
class MethodConfig:
    """Base of every method's config dataclass: every field is checked when a config is made
    (``__post_init__``) or changed (``update``), see the module docstring."""

    def __post_init__(self) -> None:
        for f in fields(self):
            check_option(type(self), f.name, getattr(self, f.name))

    def update(self, **overrides: Any) -> MethodConfig:
        """Set fields by name, ignoring ``None`` values; an unknown name or a bad value is an
        error (``MethodError``) and leaves the config unchanged."""
        changes = {key: value for key, value in overrides.items() if value is not None}
        for key, value in changes.items():
            check_option(type(self), key, value)
        for key, value in changes.items():
            setattr(self, key, value)
        return self


@dataclass
class Result:
    """What ``run`` returns: the answer and the passages it rests on."""

    answer: str
    passages: list[Passage]


class Method:
    """Base class; subclasses set ``name``, ``Config``, ``needs_retriever`` and implement ``run``."""

    name: ClassVar[str] = "method"
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    needs_retriever: ClassVar[bool] = False

    def __init__(self, llm: LLMBase, retriever: Retriever | None = None, config: MethodConfig | None = None) -> None:
        self.llm = traced_llm(llm)
        self.retriever = traced_retriever(retriever)
        self.config = config if config is not None else self.Config()

    # -- to implement ----------------------------------------------------------------------
    def run(self, question: str, retriever: TracedRetriever | None) -> Result:  # pragma: no cover
        raise NotImplementedError

    # -- public API ------------------------------------------------------------------------
    def answer(self, question: str, retriever: Retriever | None = None) -> Answer:
        """Answer one question; failures are returned in ``Answer.error`` with the trace."""
        usage = Usage()
        trace = Trace(question=question, method=self.name, config=asdict(self.config))
        t0 = time.perf_counter()
        text, passages, error = "", [], None
        try:
            question = self.validate(question)
            r = traced_retriever(retriever) if retriever is not None else self.retriever
            if self.needs_retriever and r is None:
                raise MethodError(f"the method {self.name!r} needs a retriever (a corpus or a candidate pool)")
            with accounting(usage), trace.activate():
                result = self.run(question, r)
            text, passages = result.answer, result.passages
        except Exception as exc:  # recorded, never lost: see the module docstring
            error = f"{type(exc).__name__}: {exc}"
            if trace.root.error is None:
                trace.root.error = error
        usage.seconds = time.perf_counter() - t0
        trace.root.output(answer=text, error=error)
        return Answer(question=question, answer=text, method=self.name, passages=passages, trace=trace,
                      usage=usage, error=error)

    def answer_or_raise(self, question: str, retriever: Retriever | None = None) -> Answer:
        """Like ``answer`` but raises ``RuntimeError`` when the method failed."""
        ans = self.answer(question, retriever)
        if ans.error:
            raise RuntimeError(ans.error)
        return ans

    @staticmethod
    def validate(question: str) -> str:
        """The question with whitespace collapsed; ``MethodError`` if empty or too long."""
        return validate_question(question)


def validate_question(question: str) -> str:
    """``question`` with whitespace collapsed; ``MethodError`` if it is empty or longer than
    ``MAX_QUESTION_CHARS`` (checked by ``Method.answer``; callers check it before costly work)."""
    if not isinstance(question, str) or not question.strip():
        raise MethodError("the question is empty")
    q = " ".join(question.split())
    if len(q) > MAX_QUESTION_CHARS:
        raise MethodError(f"the question is {len(q)} characters long; the limit is {MAX_QUESTION_CHARS}: "
                          "shorten it")
    return q


# -- registry ----------------------------------------------------------------------------------
#: The built-in methods: registered name -> the module that registers it (imported on first use;
#: tests/test_methods_registry.py checks this table against the ``@register`` decorators).
BUILTIN_METHODS: dict[str, str] = {
    "cot": "hopqa.methods.cot",
    "direct": "hopqa.methods.direct",
    "genread": "hopqa.methods.genread",
    "gensco-max": "hopqa.methods.gensco",
    "gensco-stop": "hopqa.methods.gensco",
    "gensco-no-qd": "hopqa.methods.gensco",
    "hgot": "hopqa.methods.hgot",
    "ircot": "hopqa.methods.ircot",
    "iter-retgen": "hopqa.methods.iter_retgen",
    "react": "hopqa.methods.react",
    "retrieve-then-read": "hopqa.methods.retrieve_read",
    "self-ask": "hopqa.methods.self_ask",
    "self-dc": "hopqa.methods.self_dc",
}


class MethodRegistry(MutableMapping[str, "type[Method]"]):
    """Method classes by name. Names (iteration, ``in``, ``len``) come without imports; a
    built-in method's module is imported (and registers its classes) when its class is first
    looked up. ``register`` adds to it, so methods defined elsewhere appear as well."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = dict(modules)
        self._classes: dict[str, type[Method]] = {}

    def __getitem__(self, name: str) -> type[Method]:
        cls = self._classes.get(name)
        if cls is None:
            module = self._modules.get(name)
            if module is None:
                raise KeyError(name)
            importlib.import_module(module)  # thread-safe (the import lock); registers its methods
            cls = self._classes.get(name)
            if cls is None:
                raise KeyError(f"{module} did not register the method {name!r}")
        return cls

    def __setitem__(self, name: str, cls: type[Method]) -> None:
        self._classes[name] = cls

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._classes.pop(name, None)
        self._modules.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._classes or name in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._modules, *self._classes]))

    def __len__(self) -> int:
        return len(self._modules.keys() | self._classes.keys())

    def loaded(self) -> list[str]:
        """The names whose classes are imported already."""
        return list(self._classes)

    def __repr__(self) -> str:
        return f"MethodRegistry({sorted(self)})"


METHODS: MethodRegistry = MethodRegistry(BUILTIN_METHODS)


def register(name: str):  # type: ignore[no-untyped-def]
    """Class decorator: make a method available under ``name`` (lowercase, hyphens)."""

    def deco(cls: type[Method]) -> type[Method]:
        cls.name = name
        METHODS[name] = cls
        return cls

    return deco


def normalize_name(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def get_method_class(name: str) -> type[Method]:
    """The method class registered as ``name`` (underscores and case are forgiven); imports its
    module on first use."""
    key = normalize_name(name)
    if key not in METHODS:
        raise MethodError(f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}")
    return METHODS[key]


def build_method(name: str, llm: LLMBase, retriever: Retriever | None = None, *,
                 components: dict[str, Any] | None = None, **options: Any) -> Method:
    """Instantiate a registered method with its default config updated by ``options``.

    ``components`` are extra constructor arguments some methods take (GenSco's ``scorer``,
    HGOT's ``judge`` and ``embedder``); a component the method does not take is an error."""
    cls = get_method_class(name)
    config = cls.Config().update(**options)
    extra = {k: v for k, v in (components or {}).items() if v is not None}
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "llm", "retriever", "config"}
    unknown = set(extra) - accepted
    if unknown:
        raise MethodError(f"the method {name!r} takes no {', '.join(sorted(unknown))} "
                          f"(it takes: {', '.join(sorted(accepted)) or 'nothing extra'})")
    return cls(llm, retriever, config, **extra)


def takes_component(name: str, component: str) -> bool:
    """Whether the method's constructor accepts ``component`` (e.g. GenSco's ``scorer``)."""
    return component in inspect.signature(get_method_class(name).__init__).parameters


def known_options(name: str) -> set[str]:
    return {f.name for f in fields(get_method_class(name).Config)}
