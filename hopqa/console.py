"""What ``hopqa ask`` prints on a terminal: the reasoning compactly, then the answer and the cost.

::

    Question: Who is the director of the film that won Best Picture at the 1998 Oscars?
    Method: self-ask (embedded:qwen2.5-1.5b)
     1. follow-up: Which film won Best Picture at the 1998 Oscars?
        -> Titanic
        passages: 70th Academy Awards (12.31) | Titanic (1997 film) (9.87) | ...
     2. follow-up: Who directed Titanic?
        -> James Cameron
        passages: Titanic (1997 film) (14.02) | ...
    Answer: James Cameron
    Cost: 5 LLM calls (0 cached), ...

Each hop (``Answer.hops``: a sub-question, query or reasoning sentence with its answer and the
passages it used; nested hops indented) takes two or three lines; a method without hops
(Retrieve-then-Read, Direct, ...) shows the passages of its answer instead. Everything shown
is cleaned of terminal control characters (escape sequences, bidirectional marks), so a model
reply cannot move the cursor or reorder the line; the raw text stays in the trace
(``--json``, where ``json_safe`` writes those characters as ``\\uXXXX`` escapes: the same JSON
value, harmless on a terminal). Error and warning messages are printed with ``one_line``.

Progress bars and warnings, for every command: ``progress_bar`` is the one tqdm bar of hopqa
(model assembly, downloads, evaluation runs, HGOT's bootstrap), or a silent stand-in when it is
switched off; ``show_warning`` (the command's ``warnings.showwarning``) writes each warning as
one ``hopqa: warning: ...`` line above the bars (``tqdm.write``) instead of into them. This
module sits below the LLM backends, the datasets and the evaluation so that each can use both.
"""

from __future__ import annotations

import re
import sys
import textwrap
import unicodedata
from collections.abc import Iterable
from typing import Any

from hopqa.types import Answer

#: Characters a terminal acts on: C0/C1 controls (but tab and newline), DEL, bidi controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u061c]")
#: How many passages a hop lists, how wide a line may get, how many lines a text may take.
HOP_PASSAGES = 3
WIDTH = 110
MAX_LINES = 3


def safe(text: Any) -> str:
    """``text`` without terminal control characters (ANSI escapes lose their ESC and show as text)."""
    cleaned = _CONTROL.sub("", str(text))
    return "".join(ch for ch in cleaned if ch in "\t\n" or unicodedata.category(ch) != "Cc")


def one_line(text: Any) -> str:
    """``text`` cleaned (``safe``) on one line, whitespace collapsed: for error messages."""
    return " ".join(safe(text).split())


def json_safe(text: str) -> str:
    """JSON text with each terminal control character written as a ``\\uXXXX`` escape.

    Only string contents can hold such characters (``json.dumps`` escapes C0 controls itself,
    not DEL, C1 controls or bidirectional marks), so the result is the same JSON value."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def clip(text: Any, width: int) -> str:
    """One line of at most ``width`` characters (whitespace collapsed)."""
    line = one_line(text)
    return line if len(line) <= width else line[: max(0, width - 3)].rstrip() + "..."


def wrap(text: Any, first: str, rest: str, width: int = WIDTH, max_lines: int = MAX_LINES) -> list[str]:
    """``text`` on at most ``max_lines`` lines of ``width`` characters, the first starting with
    ``first`` and the others indented by ``rest`` (the last line ends in "..." if cut)."""
    return textwrap.wrap(" ".join(safe(text).split()), width=width, initial_indent=first,
                         subsequent_indent=rest, max_lines=max_lines, placeholder=" ...") or [first.rstrip()]


def _passage_list(passages: list[dict[str, Any]], limit: int = HOP_PASSAGES) -> str:
    shown = []
    for p in passages[:limit]:
        title = clip(p.get("title") or p.get("id") or "?", 40)
        score = p.get("score")
        shown.append(f"{title} ({score:.2f})" if isinstance(score, (int, float)) else title)
    more = len(passages) - limit
    return " | ".join(shown) + (f" | +{more} more" if more > 0 else "")


def render_answer(answer: Answer, llm: str = "", show_trace: bool = False) -> str:
    """The human output of one answered question (see the module docstring)."""
    lines = [*wrap(answer.question, "Question: ", " " * 10),
             f"Method: {answer.method}" + (f" ({safe(llm)})" if llm else "")]
    hops = answer.hops
    for n, hop in enumerate(hops, 1):
        pad = "   " * hop.depth
        body = " " * len(f"{pad}{n:>2}. ")
        lines += wrap(hop.question, f"{pad}{n:>2}. " + (f"{hop.label}: " if hop.label else ""), body)
        if hop.answer:
            lines += wrap(hop.answer, body + "-> ", body + "   ")
        if hop.passages:
            lines.append(body + "passages: " + clip(_passage_list(hop.passages), WIDTH - len(body) - 10))
    if answer.error:
        lines.append(f"Error: {clip(answer.error, 400)}")
    lines.append(f"Answer: {clip(answer.answer, 400) or '(none)'}")
    if answer.passages and hops:
        refs = [p.to_dict() for p in answer.passages]
        lines.append(f"Read from {len(refs)} passage{'s' if len(refs) != 1 else ''}: "
                     + clip(_passage_list(refs, limit=5), WIDTH))
    elif answer.passages:
        lines.append("Passages:")
        for i, p in enumerate(answer.passages, 1):
            score = f" ({p.score:.2f})" if p.score is not None else ""
            lines.append(f"  [{i}] {clip(p.preview(), WIDTH - 16)}{score}")
    lines.append(f"Cost: {answer.usage.summary()}")
    if show_trace and answer.trace is not None:
        lines.append("Trace:")
        lines.append(safe(answer.trace.render()))
    return "\n".join(lines)


# -- progress bars and warnings -------------------------------------------------------------------
class _NoProgress:
    """What ``progress_bar`` returns when it is off: the calls of a bar, doing nothing."""

    def __init__(self, iterable: Iterable[Any] | None = None) -> None:
        self._iterable = iterable if iterable is not None else ()

    def __iter__(self) -> Any:
        return iter(self._iterable)

    def update(self, n: float = 1) -> None:
        pass

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: float | None = None, desc: str = "", *, enabled: bool = True,
                 iterable: Iterable[Any] | None = None, **options: Any) -> Any:
    """A tqdm bar on stderr (``total`` steps, or over ``iterable``; ``options`` are tqdm's:
    ``unit``, ``unit_scale``, ``initial``, ...), or a silent stand-in with the same
    ``update`` / ``set_postfix`` / ``close`` / iteration when ``enabled`` is false or tqdm is
    not installed. Warnings shown through ``show_warning`` appear above it."""
    if not enabled:
        return _NoProgress(iterable)
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return _NoProgress(iterable)
    return tqdm(iterable, total=total, desc=desc, **options)


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
    """A ``warnings.showwarning``: one ``hopqa: warning: ...`` line on stderr, written above any
    progress bar (``tqdm.write``) instead of into it. With no bar on screen the line is written
    directly: ``tqdm.write`` would create tqdm's lock on its first call (importing
    multiprocessing), and a Ctrl-C landing in that import left tqdm without its lock, so that
    ``tqdm.write`` raised ``AttributeError`` in place of the ``KeyboardInterrupt``; ``hopqa eval``
    then exited 1 and went on answering the questions already queued instead of stopping (seen on
    a question file whose bad lines are warned about as they are read)."""
    from tqdm import tqdm

    line = f"hopqa: warning: {one_line(message)}"
    if getattr(tqdm, "_instances", None):
        tqdm.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)
