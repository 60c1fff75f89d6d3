"""The embedded model's prefix cache: the KV state of several prompt prefixes, not only the last.

A method's calls repeat the start of earlier prompts (the same demonstrations in every Predict,
the same instructions in every review) with calls of other kinds in between, so the one KV
cache of a llama.cpp context, which keeps only the last prompt, evaluates the same prefix again
and again. ``PrefixCache`` keeps snapshots of the KV state of whole-block prefixes (the
backend's ``block``-aligned evaluation, so a restored block holds exactly the numbers a fresh
evaluation gives: the backend's reproducibility guarantee holds), each with the tokens it
covers, within a memory budget:

- ``longest(tokens, block, limit)``: the entry sharing the longest prefix with ``tokens``, as a
  whole number of blocks and at most ``limit`` tokens (the caller always evaluates at least one
  token itself), or None;
- ``put(tokens, data)``: keep a snapshot; an entry whose tokens are a prefix of the new one's
  is dropped (the new one serves every prompt the old one served), the least recently used
  entries are evicted beyond ``budget`` bytes, and a snapshot larger than the budget is not
  kept;
- ``hits``, ``misses``, ``restored_tokens``, ``evictions``: what it saved, for traces and
  benchmarks; ``mark()`` and ``use_since(mark)`` give one request's share of them (what each
  LLM call of a trace records as ``prefix_cache``).

Lookup compares token lists entry by entry (a few dozen entries of a few thousand tokens: far
below the cost of evaluating one block); the snapshots are opaque bytes to this module.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Entry:
    """One cached prefix: its tokens and the snapshot of the KV state that covers them."""

    tokens: tuple[int, ...]
    data: bytes


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PrefixCache:
    """Snapshots of whole-block prompt prefixes within ``budget`` bytes (module docstring)."""

    def __init__(self, budget: int) -> None:
        if budget < 0:
            raise ValueError(f"the prefix cache budget must be at least 0 bytes, not {budget!r}")
        self.budget = budget
        self._entries: OrderedDict[tuple[int, ...], Entry] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.restored_tokens = 0
        self.evictions = 0

    @property
    def size(self) -> int:
        """Bytes of the snapshots kept."""
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, tokens: Sequence[int], block: int, limit: int) -> tuple[int, Entry] | None:
        """``(n, entry)``: the entry sharing the most whole blocks with ``tokens`` (``n`` tokens,
        at most ``limit``), marked as recently used; None when none shares a block."""
        best: tuple[int, Entry] | None = None
        with self._lock:
            for entry in self._entries.values():
                n = min(common_prefix(entry.tokens, tokens), limit)
                n -= n % block
                if n > 0 and (best is None or n > best[0]):
                    best = (n, entry)
            if best is None:
                self.misses += 1
                return None
            self._entries.move_to_end(best[1].tokens)
            self.hits += 1
            return best

    def count_restored(self, n: int) -> None:
        with self._lock:
            self.restored_tokens += n

    def put(self, tokens: Sequence[int], data: bytes) -> bool:
        """Keep ``data`` as the snapshot of ``tokens`` (module docstring); whether it was kept."""
        key = tuple(tokens)
        if not key or len(data) > self.budget:
            return False
        with self._lock:
            for old in [k for k in self._entries if len(k) <= len(key) and key[: len(k)] == k]:
                self._size -= len(self._entries.pop(old).data)
            self._entries[key] = Entry(key, data)
            self._size += len(data)
            while self._size > self.budget:
                _, evicted = self._entries.popitem(last=False)
                self._size -= len(evicted.data)
                self.evictions += 1
        return True

    def covers(self, tokens: Sequence[int]) -> bool:
        """Whether some entry's tokens start with all of ``tokens`` (nothing new to keep)."""
        key = tuple(tokens)
        with self._lock:
            return any(len(k) >= len(key) and k[: len(key)] == key for k in self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0

    def mark(self) -> tuple[int, int]:
        """The counters ``use_since`` measures from: restored tokens and evictions so far."""
        with self._lock:
            return self.restored_tokens, self.evictions

    def use_since(self, mark: tuple[int, int]) -> dict[str, float]:
        """Since ``mark``: tokens restored from snapshots and snapshots evicted; and what the
        cache holds now (entries, MiB)."""
        with self._lock:
            return {"restored": self.restored_tokens - mark[0], "evicted": self.evictions - mark[1],
                    "entries": len(self._entries), "mb": round(self._size / 2**20, 1)}

    def stats(self) -> dict[str, int]:
        """What the cache holds and saved (module docstring)."""
        with self._lock:
            return {"entries": len(self._entries), "bytes": self._size, "hits": self.hits, "misses": self.misses,
                    "restored_tokens": self.restored_tokens, "evictions": self.evictions}
