"""What every method is: a class with a typed config and ``answer(question) -> Answer``.

``Method.answer`` validates the question, opens the trace and the usage account, runs the
method's ``run`` and packs the result. A method talks to the world only through ``self.llm``
(a traced LLM) and the retriever it is given (traced too), so every call lands in the trace
and the usage. Errors never escape ``answer``: they come back as ``Answer.error`` with the
partial trace (a batch of ten thousand questions must not stop on one); ``answer_or_raise``
is the strict variant.

Methods register themselves by name (``@register("retrieve-then-read")``); CLI names are
lowercase with hyphens, underscores accepted as aliases.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from hopqa.config import MAX_QUESTION_CHARS
from hopqa.llm.base import LLMBase
from hopqa.retrieval.base import Retriever
from hopqa.runtime import TracedRetriever, accounting, traced_llm, traced_retriever
from hopqa.trace import Trace
from hopqa.types import Answer, Passage, Usage


class MethodError(ValueError):
    """Bad input to a method (empty or huge question, missing retriever, bad option)."""


@dataclass
class MethodConfig:
    """Base of every method's config dataclass."""

    def update(self, **overrides: Any) -> MethodConfig:
        """Set fields by name, ignoring ``None`` values; unknown names are an error."""
        names = {f.name for f in fields(self)}
        for key, value in overrides.items():
            if value is None:
                continue
            if key not in names:
                raise MethodError(f"{type(self).__name__} has no option {key!r} (options: {', '.join(sorted(names))})")
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
        if not isinstance(question, str) or not question.strip():
            raise MethodError("the question is empty")
        q = " ".join(question.split())
        if len(q) > MAX_QUESTION_CHARS:
            raise MethodError(f"the question is {len(q)} characters long; the limit is {MAX_QUESTION_CHARS}")
        return q


# -- registry ----------------------------------------------------------------------------------
METHODS: dict[str, type[Method]] = {}


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
    """The method class registered as ``name`` (underscores and case are forgiven)."""
    import hopqa.methods  # noqa: F401  (registers the built-in methods)

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
