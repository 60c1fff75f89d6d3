"""Greedy decoding under a grammar: the model's own choice is checked before the vocabulary is.

A request with a JSON schema is decoded under a llama.cpp grammar. llama-cpp-python samples each
token with one sampler chain (penalties, grammar, greedy) applied to every token of the
vocabulary, so the grammar checks all ~150,000 candidates at every step (Qwen2.5: ~24 ms a
token on 2 cores, a third of its decoding time), although the model's top token is almost
always one the grammar allows. llama.cpp's own ``common_sampler`` samples first and applies the
grammar to the whole vocabulary only when the sampled token is rejected; this does the same for
greedy requests (temperature 0), where it is exact:

- the greedy sampler picks the first token with the highest logit; the grammar only sets
  rejected tokens' logits to -inf and judges each candidate alone, from its current state;
- so if the vocabulary's first highest-logit token is allowed, it is the token the whole chain
  picks. It is checked by applying the chain's own grammar sampler to that one candidate, then
  accepted by the chain (grammar state and penalties' history advance exactly as after a full
  sample); otherwise (or with a NaN, other samplers or penalties in the chain) the chain samples
  as before, from the untouched state.

Sampled requests (temperature > 0) keep the full chain: sampling first and re-sampling on a
rejection gives the same distribution but other draws for a seed, and hopqa's outputs depend only
on their seeds. The tests compare every greedy output with the grammar, token by token, against
the chain alone.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

#: The sampler chain llama-cpp-python builds for a greedy request with a grammar, no logits
#: processor and neutral penalties (llama.cpp names a disabled sampler with a leading "?"): the
#: only chain this shortcut reads.
CHAIN = (b"?penalties", b"grammar", b"greedy")


def sample(llama: Any, options: dict[str, Any]) -> int | None:
    """The token ``llama.sample(**options)`` would return, found by checking the top token
    against the grammar (module docstring) and accepted by the sampler chain; None when this
    request is not greedy under a grammar, or the top token is not allowed (the caller then
    samples with the chain)."""
    sampler = getattr(llama, "_sampler", None)  # llama-cpp-python's chain, set by ``generate``
    if not _greedy_with_grammar(options) or sampler is None:
        return None
    import llama_cpp

    chain = sampler.sampler
    names = tuple(llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(chain, i))
                  for i in range(llama_cpp.llama_sampler_chain_n(chain)))
    if names != CHAIN:
        return None
    idx = options.get("idx")
    ridx = idx - llama.n_tokens if idx is not None else -1
    n_vocab = llama.n_vocab()
    row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama._ctx.ctx, ridx), shape=(n_vocab,))
    token = int(np.argmax(row))
    logit = float(row[token])
    if not math.isfinite(logit):
        return None
    one = llama_cpp.llama_token_data(id=token, logit=logit, p=0.0)
    candidates = llama_cpp.llama_token_data_array(data=ctypes.pointer(one), size=1, selected=-1, sorted=False)
    llama_cpp.llama_sampler_apply(llama_cpp.llama_sampler_chain_get(chain, 1), ctypes.byref(candidates))
    if not math.isfinite(one.logit):  # rejected: the whole vocabulary is the chain's to judge
        return None
    llama_cpp.llama_sampler_accept(chain, token)
    return token


def _greedy_with_grammar(options: dict[str, Any]) -> bool:
    return (options.get("temp") == 0.0 and options.get("grammar") is not None
            and options.get("logits_processor") is None
            and options.get("repeat_penalty", 1.0) == 1.0 and options.get("frequency_penalty", 0.0) == 0.0
            and options.get("presence_penalty", 0.0) == 0.0)
