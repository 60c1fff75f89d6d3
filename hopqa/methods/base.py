"""What every method is: a class with a typed config and ``answer(question) -> Answer``.

``Method.answer`` validates the question, opens the trace and the usage account, runs the
method's ``run`` and packs the result. A method talks to the world only through ``self.llm``
(a traced LLM) and, for a ``RetrievingMethod``, ``self.retriever`` (traced too, required when
it is built; ``with_retriever`` gives the same method over another one), so every call lands
in the trace and the usage. Errors never escape ``answer``: they come back as
``Answer.error`` with the partial trace (a batch of ten thousand questions must not stop on
one); ``answer_or_raise`` is the strict variant.

Inputs: a method declares what it takes beyond the LLM and its config in ``components``
(``retriever``, ``demos`` for a ``FewShotMethod``, GenSco's ``scorer``, HGOT's ``judge``,
``embedder``, ``demo_set``), each a keyword of its constructor; ``hopqa.build`` makes them.
A method never reads data files or the environment.

Methods register themselves by name (``@register("retrieve-then-read")``; a *variant name* is
one class under another name with config defaults changed: ``gensco-stop`` is GenSco with
``variant="stop"``); CLI names are lowercase with hyphens, underscores accepted as aliases.

Presets: a method may name sets of options in ``Method.presets`` (``{"small-model":
Preset({...}, "why")}``): ``method_config(name, preset="small-model")`` applies them over the
method's defaults, and options given beside win over them (``--preset`` of the CLI,
``preset=`` of ``hopqa.pipeline`` and ``build_method``, ``"preset"`` among a service request's
options). The defaults stay the papers'; a preset departs from them on purpose (issue 33).
An option that acts only with another one on declares it (``field(metadata={"needs":
"chain"})``): when the options given beside a preset turn that one off, the preset's value of
the dependent option goes too (``--preset small-model --set chain=false`` drops the preset's
chain demonstrations instead of refusing them); set explicitly away from its default with that
one off, it is refused when the method is made (``check_dependent_options``), the fix named.
The registry ``METHODS`` knows the built-in methods' names and modules (``BUILTIN_METHODS``)
without importing them: a method's module is imported when its class is first asked for
(``METHODS[name]``, ``get_method_class``, ``instantiate``), so a command pays only for the
methods it uses (HGOT alone imports networkx; every method together took ~0.25 s of
start-up). Listing the names imports nothing.

Options: every config field is checked in one place, ``check_option`` (``hopqa.options``,
the converter the LLM specs use too), whenever a config is made or changed
(``MethodConfig.__post_init__`` and ``update``): its type (a whole number for an ``int``
field, a finite number for a ``float``, ``true``/``false`` for a ``bool``, one of the choices
for a ``Literal``) and, for a number, its range: ``field(metadata={"range": (low, high)})`` on
the field if given, else ``OPTION_RANGES`` by field name (one table for every method: a name
means the same in each), else whole numbers take ``DEFAULT_INT_RANGE`` (0 to 10,000). Every
range is finite, so no option can ask for work without end (``max_steps=10**9``); a service
caps them tighter still (``hopqa.server.settings``). ``parse_option`` turns the text of
``--set KEY=VALUE`` into the field's type and checks it.

Resources: an option naming a dataset, a directory, a model or a URL is marked
``field(metadata={"resource": "dataset" | "directory" | "model" | "url"})``
(``hopqa.options.resource_fields`` lists them): HGOT's ``bootstrap_dataset`` and
``demo_cache``, LeapQuery's ``rerank``. The CLI and the Python API take paths there; the HTTP
service takes only names the operator allows (``hopqa.server.jobs``).
"""

from __future__ import annotations

import copy
import importlib
import time
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar, Self

from hopqa.config import MAX_QUESTION_CHARS
from hopqa.llm.base import LLMBase
from hopqa.options import OptionError, check_value, convert, declared_range
from hopqa.retrieval.base import Retriever
from hopqa.runtime import Cancelled, TracedRetriever, accounting, traced_llm, traced_retriever
from hopqa.trace import Trace
from hopqa.types import Answer, Demo, Passage, Usage


class MethodError(ValueError):
    """Bad input to a method (empty or huge question, missing retriever, bad option)."""


#: Allowed values of numeric options by field name: ``(low, high)``, both inclusive. Counts of
#: something a method does or uses at least once are >= 1; counts that may be 0 say so. Every
#: bound is finite: the high is the most a method could sensibly use (a model's output, a page of
#: passages, a loop that should have ended), not a service's budget (``hopqa serve --cap`` sets
#: tighter ones). A field's own ``metadata={"range": ...}`` takes precedence.
OPTION_RANGES: dict[str, tuple[float | None, float | None]] = {
    # at least one
    "k": (1, 1000),  # passages per retrieval (HGOT: passages infer keeps)
    "probe_k": (1, 1000),  # passages an HGOT probe retrieves
    "max_tokens": (1, 32768),  # tokens per generated answer or step
    "document_tokens": (1, 32768),  # tokens per generated document (GenRead, Self-DC)
    "n_documents": (1, 64),  # generated documents (GenRead)
    "samples": (1, 64),  # sampled thoughts per step (HGOT)
    "iterations": (1, 100),  # retrieval-generation rounds (Iter-RetGen)
    "max_steps": (1, 100),  # reasoning steps (IRCoT, ReAct, Self-Ask, HGOT plan)
    "max_levels": (1, 100),  # sub-question levels (GenSco)
    "stop_from_level": (1, 100),  # first level the STOP test is applied at (GenSco)
    "max_paragraphs": (1, 1000),  # paragraphs kept (IRCoT)
    "max_subquestions": (1, 50),  # sub-questions per decomposition (Self-DC, LeapQuery)
    "max_passage_words": (1, 10000),  # words shown per passage
    "scorer_passage_words": (1, 10000),
    "total_passage_words": (1, 100000),  # words of all passages in a prompt
    "observation_sentences": (1, 100),  # sentences per observation (ReAct)
    "bootstrap_examples": (1, 100000),  # training examples run to bootstrap demonstrations (HGOT)
    # zero allowed
    "shots": (0, 64),  # few-shot demonstrations per prompt (0: zero-shot)
    "num_demos": (0, 64),  # bootstrapped demonstrations per prompt (HGOT)
    "depth": (0, 10),  # decomposition depth limit (0: answer without decomposing)
    "seed": (0, 2**32 - 1),
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
    "plan_context_sigma": (0.0, 1.0),  # a passage score σ (HGOT's plan context)
    "parent_weight": (0.0, 1.0),  # discount of the query's own passages in HGOT's infer
}
#: The range of an ``int`` field found neither in its metadata nor in ``OPTION_RANGES`` (a
#: method defined outside hopqa; every built-in option declares its own,
#: tests/test_option_ranges.py checks it).
DEFAULT_INT_RANGE: tuple[float | None, float | None] = (0, 10000)


def option_range(config_cls: type[MethodConfig], name: str) -> tuple[float | None, float | None] | None:
    """The allowed ``(low, high)`` of a numeric option: the field's ``metadata["range"]``, else
    ``OPTION_RANGES``, else None (then whole numbers take ``DEFAULT_INT_RANGE``)."""
    return declared_range(config_cls, name, OPTION_RANGES)


def _method_error(config_cls: type[MethodConfig], exc: OptionError) -> MethodError:
    known = exc.name in {f.name for f in fields(config_cls)}
    return MethodError(str(exc) if known else f"{config_cls.__name__}: {exc}")


def check_option(config_cls: type[MethodConfig], name: str, value: Any) -> None:
    """Raise ``MethodError`` unless ``value`` suits the option ``name`` (type, range, choices):
    ``hopqa.options.check_value`` with the ranges above."""
    try:
        check_value(config_cls, name, value, ranges=OPTION_RANGES, default_int_range=DEFAULT_INT_RANGE)
    except OptionError as exc:
        raise _method_error(config_cls, exc) from None


def parse_option(config_cls: type[MethodConfig], name: str, text: str) -> Any:
    """The value of option ``name`` written as ``text`` (``--set name=text``), converted to the
    field's type and checked; ``none`` (or nothing) unsets an optional field."""
    try:
        return convert(config_cls, name, text, ranges=OPTION_RANGES, default_int_range=DEFAULT_INT_RANGE)
    except OptionError as exc:
        raise _method_error(config_cls, exc) from None


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
    #: Figures the method reports about its own work (``Answer.metrics``).
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Preset:
    """A named set of a method's options (module docstring, "Presets"): the options and why."""

    options: dict[str, Any]
    doc: str = ""


class Method:
    """Base class; subclasses set ``name``, ``Config`` and ``components`` and implement ``run``.

    ``components`` names what the method takes beyond the LLM and its config, each a keyword
    of its constructor: ``retriever`` (``RetrievingMethod``: required), ``demos`` (few-shot
    demonstrations, ``FewShotMethod``), and a method's own (GenSco's ``scorer``, HGOT's
    ``judge``, ``embedder`` and ``demo_set``). Whoever builds a method (``hopqa.build``)
    reads it to know what to supply; nothing inspects constructor signatures."""

    name: ClassVar[str] = "method"
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    components: ClassVar[frozenset[str]] = frozenset()
    #: Named sets of options (module docstring, "Presets"), e.g. ``small-model``.
    presets: ClassVar[dict[str, Preset]] = {}

    def __init__(self, llm: LLMBase, config: MethodConfig | None = None) -> None:
        self.llm = traced_llm(llm)
        self.config = config if config is not None else self.Config()
        check_dependent_options(self.name, self.config)

    # -- to implement ----------------------------------------------------------------------
    def run(self, question: str) -> Result:  # pragma: no cover
        raise NotImplementedError

    # -- public API ------------------------------------------------------------------------
    def answer(self, question: str) -> Answer:
        """Answer one question; failures are returned in ``Answer.error`` with the trace."""
        usage = Usage()
        trace = Trace(question=question, method=self.name, config=asdict(self.config))
        t0 = time.perf_counter()
        text, passages, error, cancelled = "", [], None, False
        figures: dict[str, float] = {}
        try:
            question = self.validate(question)
            with accounting(usage), trace.activate():
                result = self.run(question)
            text, passages, figures = result.answer, result.passages, dict(result.metrics)
        except Cancelled as exc:  # stopped from outside (hopqa.runtime.cancellable): not an answer
            cancelled, error = True, f"cancelled: {exc}"
            if trace.root.error is None:
                trace.root.error = error
        except Exception as exc:  # recorded, never lost: see the module docstring
            error = f"{type(exc).__name__}: {exc}"
            if trace.root.error is None:
                trace.root.error = error
        usage.seconds = time.perf_counter() - t0
        trace.root.output(answer=text, error=error)
        return Answer(question=question, answer=text, method=self.name, passages=passages, trace=trace,
                      usage=usage, error=error, metrics=figures, cancelled=cancelled)

    def answer_or_raise(self, question: str) -> Answer:
        """Like ``answer`` but raises ``RuntimeError`` when the method failed."""
        ans = self.answer(question)
        if ans.error:
            raise RuntimeError(ans.error)
        return ans

    @staticmethod
    def validate(question: str) -> str:
        """The question with whitespace collapsed; ``MethodError`` if empty or too long."""
        return validate_question(question)

    @classmethod
    def needs(cls, config: MethodConfig) -> frozenset[str]:
        """The LLM capabilities (``hopqa.llm.base``) the method needs with ``config`` beyond
        generating text, so that a builder can load the model with them (Self-DC's
        ``confidence=prob``: ``logprobs``)."""
        return frozenset()


class RetrievingMethod(Method):
    """A method that retrieves: its retriever is a required constructor argument (traced, so
    every search lands in the trace and the usage). ``with_retriever`` gives the same method
    over another retriever (the evaluation's per-question candidate pools)."""

    components: ClassVar[frozenset[str]] = frozenset({"retriever"})

    def __init__(self, llm: LLMBase, retriever: Retriever, config: MethodConfig | None = None) -> None:
        super().__init__(llm, config)
        if retriever is None:
            raise MethodError(f"the method {self.name!r} needs a retriever (a corpus or a candidate pool)")
        self.retriever: TracedRetriever = traced_retriever(retriever)

    def with_retriever(self, retriever: Retriever) -> Self:
        """A copy of this method searching ``retriever`` (everything else shared: LLM, config,
        components). Cheap: what is costly to build was built once with the method."""
        if retriever is None:
            raise MethodError(f"the method {self.name!r} needs a retriever (a corpus or a candidate pool)")
        bound = copy.copy(self)
        bound.retriever = traced_retriever(retriever)
        return bound


class FewShotMethod(RetrievingMethod):
    """A retrieving method whose prompts show ``config.shots`` demonstrations: they are its
    ``demos`` argument (``hopqa.datasets.few_shot_demos(shots)``, given by whoever builds it),
    of which it uses the first ``shots``; ``shots=0`` runs zero-shot without any."""

    components: ClassVar[frozenset[str]] = frozenset({"retriever", "demos"})

    def __init__(self, llm: LLMBase, retriever: Retriever, config: MethodConfig | None = None, *,
                 demos: Sequence[Demo] | None = None) -> None:
        super().__init__(llm, retriever, config)
        shots: int = getattr(self.config, "shots", 0)
        if shots > 0 and not demos:
            raise MethodError(f"the method {self.name!r} shows shots={shots} demonstrations: pass "
                              f"demos=hopqa.datasets.few_shot_demos({shots}) (or build it with hopqa.build), "
                              "or set shots=0")
        self.demos: tuple[Demo, ...] = tuple(demos or ())[:shots]


def check_dependent_options(method: str, config: MethodConfig) -> None:
    """``MethodError`` when an option that acts only with another one on (``field(metadata=
    {"needs": "chain"})``) is set away from its default while that one is off: it would be
    silently ignored. The message names both fixes."""
    for f in fields(config):
        needed = f.metadata.get("needs")
        if not needed or getattr(config, needed):
            continue
        default = f.default if f.default_factory is MISSING else f.default_factory()  # type: ignore[misc]
        value = getattr(config, f.name)
        if value != default:
            raise MethodError(f"the method {method!r}'s option {f.name}={_shown(value)} acts only with "
                              f"{needed}=true: set {needed}=true too (or {f.name}={_shown(default)})")


def _shown(value: Any) -> str:
    """An option's value as the command line writes it (``true``, ``4``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


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
    "gensco-max": "hopqa.methods.gensco.method",
    "gensco-stop": "hopqa.methods.gensco.method",
    "gensco-no-qd": "hopqa.methods.gensco.method",
    "hgot": "hopqa.methods.hgot.method",
    "ircot": "hopqa.methods.ircot",
    "iter-retgen": "hopqa.methods.iter_retgen",
    "leapquery": "hopqa.methods.leapquery",
    "react": "hopqa.methods.react",
    "retrieve-then-read": "hopqa.methods.retrieve_read",
    "self-ask": "hopqa.methods.self_ask",
    "self-dc": "hopqa.methods.self_dc",
    "tor": "hopqa.methods.tor.method",
    "cor": "hopqa.methods.tor.chain",
}


class MethodRegistry(MutableMapping[str, "type[Method]"]):
    """Method classes by name. Names (iteration, ``in``, ``len``) come without imports; a
    built-in method's module is imported (and registers its classes) when its class is first
    looked up. ``register`` adds to it, so methods defined elsewhere appear as well.

    A name may be a *preset*: a class with some config defaults changed
    (``"gensco-stop"`` = GenSco with ``variant="stop"``), see ``register``."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = dict(modules)
        self._classes: dict[str, type[Method]] = {}
        self._presets: dict[str, dict[str, Any]] = {}
        self._docs: dict[str, str] = {}

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
        for table in (self._classes, self._modules, self._presets, self._docs):
            table.pop(name, None)  # type: ignore[attr-defined]

    def __contains__(self, name: object) -> bool:
        return name in self._classes or name in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._modules, *self._classes]))

    def __len__(self) -> int:
        return len(self._modules.keys() | self._classes.keys())

    def preset(self, name: str) -> dict[str, Any]:
        """The config defaults the name changes (empty for a plain method)."""
        self[name]  # imports the module that registers it
        return dict(self._presets.get(name, {}))

    def doc(self, name: str) -> str:
        """One line describing the method registered as ``name``."""
        cls = self[name]
        return self._docs.get(name) or (cls.__doc__ or "").strip().splitlines()[0]

    def loaded(self) -> list[str]:
        """The names whose classes are imported already."""
        return list(self._classes)

    def __repr__(self) -> str:
        return f"MethodRegistry({sorted(self)})"


METHODS: MethodRegistry = MethodRegistry(BUILTIN_METHODS)


def register(name: str, *, preset: dict[str, Any] | None = None, doc: str = ""):  # type: ignore[no-untyped-def]
    """Class decorator: make a method available under ``name`` (lowercase, hyphens).

    ``preset`` registers the class again under another name with some config defaults changed
    (a variant: stack one decorator per name); ``doc`` describes that name in ``hopqa methods``."""

    def deco(cls: type[Method]) -> type[Method]:
        cls.name = name
        METHODS[name] = cls
        if preset:
            cls.Config(**preset)  # a bad preset fails at import, not at the first question
            METHODS._presets[name] = dict(preset)
        for named in cls.presets.values():
            cls.Config(**{**(preset or {}), **named.options})  # likewise
        if doc:
            METHODS._docs[name] = doc
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


def method_config(name: str, preset: str | None = None, **options: Any) -> MethodConfig:
    """The config of the method registered as ``name``: its defaults, its variant's, the
    options of ``preset`` (one of ``method_presets(name)``), then ``options`` (each checked;
    ``None`` values ignored)."""
    cls = get_method_class(name)
    config = cls.Config(**METHODS.preset(normalize_name(name)))
    if preset is None:
        return config.update(**options)
    base = copy.copy(config)
    chosen = preset_options(name, preset)
    config.update(**chosen).update(**options)
    # a preset's option that acts only with one the options given beside it turned off goes with it
    dropped = {f.name: getattr(base, f.name) for f in fields(config)
               if f.metadata.get("needs") and f.name in chosen and options.get(f.name) is None
               and not getattr(config, f.metadata["needs"])}
    for key, value in dropped.items():  # update() skips None, and a default may be None
        setattr(config, key, value)
    return config


def method_presets(name: str) -> dict[str, Preset]:
    """The presets of the method registered as ``name`` (module docstring, "Presets")."""
    return dict(get_method_class(name).presets)


def preset_options(name: str, preset: str) -> dict[str, Any]:
    """The options ``preset`` sets for the method ``name``; ``MethodError`` when it has no such preset."""
    presets = method_presets(name)
    key = normalize_name(preset) if isinstance(preset, str) else preset
    if key not in presets:
        have = ", ".join(sorted(presets)) or "none"
        raise MethodError(f"the method {normalize_name(name)!r} has no preset {preset!r} (its presets: {have})")
    return dict(presets[key].options)


def instantiate(name: str, llm: LLMBase, config: MethodConfig | None = None, **components: Any) -> Method:
    """The method registered as ``name`` with ``config`` (default: ``method_config(name)``) and
    its ``components`` by keyword. A component given as ``None`` counts as not given; one the
    method does not declare is an error (``MethodError``), as is a missing retriever."""
    cls = get_method_class(name)
    given = {k: v for k, v in components.items() if v is not None}
    unknown = set(given) - cls.components
    if unknown:
        raise MethodError(f"the method {normalize_name(name)!r} takes no {', '.join(sorted(unknown))} "
                          f"(it takes: {', '.join(sorted(cls.components)) or 'nothing beyond the LLM'})")
    if "retriever" in cls.components and "retriever" not in given:
        raise MethodError(f"the method {normalize_name(name)!r} needs a retriever (a corpus or a candidate pool)")
    return cls(llm, config=config if config is not None else method_config(name), **given)  # type: ignore[call-arg]


def known_options(name: str) -> set[str]:
    return {f.name for f in fields(get_method_class(name).Config)}
