"""Options: text and values checked against the typed fields of a dataclass, in one place.

Every option hopqa takes by name (a method's ``--set KEY=VALUE``, ``embedded:NAME?n_ctx=4096``,
``openai:MODEL@URL?timeout=60``) is a field of a dataclass, and its field type says what it
accepts (read with ``dataclasses.fields`` and ``typing.get_type_hints``, once per class):

- ``bool``: ``True`` or ``False`` (not 1 or 0); as text, one of ``config.TRUE_WORDS`` or
  ``config.FALSE_WORDS`` (``1 true yes on`` / ``0 false no off``, any case);
- ``int``: a whole number, not a bool; ``float``: a finite real number, not a bool (a whole
  number is accepted); ``str``: text (as text: kept exactly as given, spaces included);
- ``Literal["a", "b"]``: one of the choices (as text: a choice written exactly, spaces around
  it ignored);
- ``X | None`` (or ``None`` among a ``Literal``'s choices): any of the above or ``None``;
  as text, nothing, ``none`` or ``null`` (any case) mean ``None``. ``None`` for a field that
  is not optional is an error;
- any other type (``list[str]``, ``A | B`` of two kinds, ``Any``) is not checked, and cannot
  be set from text.

Ranges: a number (``int`` or ``float`` field) must lie within ``(low, high)``, both inclusive,
``None`` meaning unbounded, taken from the first of: the field's ``metadata["range"]``; the
caller's table ``ranges[name]`` (e.g. one table of ranges by option name shared by many
classes); for an ``int`` field, ``default_int_range`` (whole numbers are at least 0 unless
said otherwise); else unbounded. A field's ``metadata["above"] = x`` makes the lower bound
exclusive, ``value > x``, in place of the range's low (its high still applies): a timeout
is ``field(default=60.0, metadata={"above": 0})``.

Errors are ``OptionError`` (a ``ValueError`` carrying the option's ``name``) with one-line
messages a caller may wrap: ``option k must be at least 1, not 0``, ``option temperature must
be between 0.0 and 2.0, not 7.0``, ``option k must be a whole number, not 'x'``, ``unknown
option 'retires' (did you mean 'retries'?); known options: concurrency, timeout, retries``. A
whole number under its low bound is told that bound alone (a count's ``at least 1``, not its
distant ceiling); any other value out of range, the whole range.

A list of numbers: a ``str`` field with ``metadata["items"] = "int"`` holds whole numbers
separated by commas (ToR's ``widths="5,3,3"``), each checked against the field's range as an
``int`` field's value is (``numbers_of`` gives them).

Resources: a field whose value names something outside the process (a file, a directory, a
model, a URL) says so with ``metadata["resource"]`` = ``"dataset"`` (a registered dataset or a
question file), ``"directory"``, ``"model"`` or ``"url"`` (``RESOURCE_KINDS``);
``resource_fields`` lists a class's. Nothing here restricts their values (the CLI and the Python
API take paths); a caller that must not let its client reach files (the HTTP service) takes only
names from an allow-list, never a path: ``path_reason`` says why a text is not a plain name
(``/``, ``\\``, ``..``, ``~``, a drive letter, a URL scheme, a control character; a model may
be a Hugging Face name ``OWNER/MODEL``, its one ``/`` between two plain parts).

``check_value`` checks a value, ``convert`` turns text into a checked value, ``from_strings``
builds (or updates a copy of) a dataclass from ``(name, text)`` pairs; each takes the caller's
``ranges`` and ``default_int_range``. ``unknown_option`` is the unknown-name error for a caller
whose option names are not field names (the ``openai:`` spec's ``n``).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import numbers
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from hopqa.config import FALSE_WORDS, TRUE_WORDS

T = TypeVar("T")
#: ``(low, high)``, both inclusive, ``None`` for no bound.
Range = tuple[float | None, float | None]
#: The words that mean ``None`` for an optional field (compared lower-case, spaces stripped).
NONE_WORDS = ("", "none", "null")

Kind = Literal["bool", "int", "float", "str", "choice", "any"]
_KINDS: dict[Any, Kind] = {bool: "bool", int: "int", float: "float", str: "str"}
#: What a resource field names (``metadata["resource"]``; module docstring).
RESOURCE_KINDS = ("dataset", "directory", "model", "url")
_URL_SCHEME = re.compile(r"^(file|https?|ftps?|data|s3|gs|hf|ssh|sftp|smb|jar|zip|unix)\s*:", re.IGNORECASE)
_DRIVE = re.compile(r"^[A-Za-z]:")
_HUB_PART = re.compile(r"^[A-Za-z0-9][\w.-]*$")


class OptionError(ValueError):
    """A value or text that does not suit an option; ``name`` is the option's name."""

    def __init__(self, message: str, name: str = "") -> None:
        super().__init__(message)
        self.name = name

    def __reduce__(self) -> tuple[Any, ...]:  # keeps ``name`` through pickling (worker processes)
        return type(self), (str(self), self.name)


@dataclasses.dataclass(frozen=True)
class _Field:
    """What a field accepts (see the module docstring)."""

    name: str
    kind: Kind
    optional: bool
    choices: tuple[Any, ...] = ()  # of a Literal, without None
    range: Range | None = None  # metadata["range"]
    above: float | None = None  # metadata["above"]
    resource: str | None = None  # metadata["resource"]
    items: bool = False  # metadata["items"] == "int": comma-separated whole numbers


def _describe_field(f: dataclasses.Field[Any], annotation: Any) -> _Field:
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)
    optional = type(None) in args
    rest = [a for a in args if a is not type(None)]
    kind: Kind = "any"
    choices: tuple[Any, ...] = ()
    if len(rest) == 1 and typing.get_origin(rest[0]) is Literal:
        kind, choices = "choice", typing.get_args(rest[0])
        optional = optional or None in choices
        choices = tuple(c for c in choices if c is not None)
    elif len(rest) == 1 and rest[0] in _KINDS:
        kind = _KINDS[rest[0]]
    bounds = f.metadata.get("range")
    resource = f.metadata.get("resource")
    if resource is not None and resource not in RESOURCE_KINDS:
        raise ValueError(f"field {f.name}: resource must be one of {', '.join(RESOURCE_KINDS)}, not {resource!r}")
    return _Field(f.name, kind, optional, choices, (bounds[0], bounds[1]) if bounds is not None else None,
                  f.metadata.get("above"), resource, kind == "str" and f.metadata.get("items") == "int")


@functools.cache
def _fields(cls: type) -> dict[str, _Field]:
    """The checked description of every field of the dataclass ``cls``, in field order."""
    hints = typing.get_type_hints(cls)
    return {f.name: _describe_field(f, hints.get(f.name, Any)) for f in dataclasses.fields(cls)}


def field_kind(cls: type, name: str) -> Kind:
    """What the field ``name`` of the dataclass ``cls`` holds: ``bool``, ``int``, ``float``,
    ``str``, ``choice`` (a ``Literal``) or ``any`` (not checked); ``OptionError`` if unknown."""
    return _field(cls, name).kind


def resource_fields(cls: type) -> dict[str, str]:
    """The resource fields of the dataclass ``cls`` (module docstring), name -> what each names
    (``dataset``, ``directory``, ``model``, ``url``), in field order."""
    return {f.name: f.resource for f in _fields(cls).values() if f.resource is not None}


def path_reason(text: str, kind: str = "") -> str | None:
    """Why ``text`` is not a plain name but could reach a file, a directory or a host (``None``
    when it is a plain name): a ``/`` or ``\\``, ``..``, ``~``, a drive letter, a URL scheme,
    a control character (NUL included). For ``kind="model"`` one ``/`` between two plain parts
    (a Hugging Face name ``OWNER/MODEL``) is a name. Looks at the text only, never at files."""
    if not isinstance(text, str):
        return "it is not text"
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return "it holds a control character"
    if ".." in text:
        return "it holds '..'"
    if "~" in text:
        return "it holds '~'"
    if "\\" in text:
        return "it holds '\\'"
    if _URL_SCHEME.match(text) or "://" in text:
        return "it is a URL"
    if _DRIVE.match(text):
        return "it starts with a drive letter"
    if "/" in text:
        parts = text.split("/")
        if not (kind == "model" and len(parts) == 2 and all(_HUB_PART.match(p) for p in parts)):
            return "it holds '/'"
    return None


def numbers_of(cls: type, name: str, value: Any) -> list[float]:
    """The numbers the field ``name`` of ``cls`` holds as ``value``: ``[value]`` for an ``int`` or
    ``float`` field, each number of a list field (``metadata["items"]``), else ``[]`` (``None``,
    text that is not such a list)."""
    f = _field(cls, name)
    if f.kind in ("int", "float") and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return [value]
    if f.items and isinstance(value, str):
        return list(_items(value))
    return []


def _items(text: str) -> list[int]:
    """The whole numbers of a comma-separated list (spaces ignored, empty items skipped); ``[]``
    when an item is not a whole number of at most 18 ASCII digits."""
    words = [w for w in text.replace(" ", "").split(",") if w]
    if not all(w.isascii() and w.isdigit() and len(w) <= 18 for w in words):
        return []
    return [int(w) for w in words]


def unknown_option(name: str, known: Iterable[str]) -> OptionError:
    """The error for an option nobody knows: ``unknown option 'x' (did you mean 'y'?); known
    options: a, b, c`` (the guess by ``difflib``, when one is close)."""
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return OptionError(f"unknown option {name!r}{guess}; known options: {', '.join(names)}", name)


def _field(cls: type, name: str) -> _Field:
    fields = _fields(cls)
    if name not in fields:
        raise unknown_option(name, fields)
    return fields[name]


def declared_range(cls: type, name: str, ranges: Mapping[str, Range] | None = None) -> Range | None:
    """The range a numeric field declares: its ``metadata["range"]``, else ``ranges[name]``,
    else None (the defaults of ``check_value`` then apply)."""
    return _declared(_field(cls, name), ranges)


def _declared(f: _Field, ranges: Mapping[str, Range] | None) -> Range | None:
    return f.range if f.range is not None else (ranges or {}).get(f.name)


def _bounds(f: _Field, ranges: Mapping[str, Range] | None, default_int_range: Range) -> Range:
    declared = _declared(f, ranges)
    if declared is not None:
        return declared
    return default_int_range if f.kind == "int" or f.items else (None, None)


def _describe_range(low: float | None, high: float | None, above: float | None) -> str:
    if above is not None:
        return f"greater than {above}" + (f" and at most {high}" if high is not None else "")
    if low is not None and high is not None:
        return f"between {low} and {high}"
    return f"at least {low}" if low is not None else f"at most {high}"


def check_value(cls: type, name: str, value: Any, *, ranges: Mapping[str, Range] | None = None,
                default_int_range: Range = (0, None)) -> None:
    """Raise ``OptionError`` unless ``value`` suits the field ``name`` of the dataclass ``cls``:
    a known name, the field's type, and for a number its range (see the module docstring)."""
    f = _field(cls, name)
    if f.kind == "any":
        return
    if value is None:
        if f.optional:
            return
        raise OptionError(f"option {name} needs a value", name)
    if f.kind == "bool" and not isinstance(value, bool):
        raise OptionError(f"option {name} must be true or false, not {value!r}", name)
    if f.kind == "int" and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        raise OptionError(f"option {name} must be a whole number, not {value!r}", name)
    if f.kind == "float" and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                              or not math.isfinite(value)):
        raise OptionError(f"option {name} must be a finite number, not {value!r}", name)
    if f.kind == "str" and not isinstance(value, str):
        raise OptionError(f"option {name} must be text, not {value!r}", name)
    if f.kind == "choice" and not any(type(value) is type(c) and value == c for c in f.choices):
        raise OptionError(f"option {name} must be one of {', '.join(map(repr, f.choices))}, not {value!r}", name)
    if f.items:
        low, high = _bounds(f, ranges, default_int_range)
        items = _items(value)
        if not items or any((low is not None and n < low) or (high is not None and n > high) for n in items):
            raise OptionError(f"option {name} must be whole numbers separated by commas, each "
                              f"{_describe_range(low, high, None)}, not {value!r}", name)
    if f.kind in ("int", "float"):
        low, high = _bounds(f, ranges, default_int_range)
        above = f.above
        if above is not None:
            low = None  # the exclusive bound replaces the inclusive one
        if (low is not None and value < low) or (high is not None and value > high) \
                or (above is not None and value <= above):
            if f.kind == "int" and low is not None and value < low:
                high = None  # a count below its low: what it lacks ("at least 1")
            raise OptionError(f"option {name} must be {_describe_range(low, high, above)}, not {value!r}", name)


def convert(cls: type, name: str, text: str, *, ranges: Mapping[str, Range] | None = None,
            default_int_range: Range = (0, None)) -> Any:
    """The value of the field ``name`` of ``cls`` written as ``text`` (``--set name=text``,
    ``?name=text``), converted to the field's type and checked with ``check_value``."""
    f = _field(cls, name)
    word = text.strip()
    value: Any
    if f.optional and word.lower() in NONE_WORDS:
        value = None
    elif f.kind == "bool":
        if word.lower() not in TRUE_WORDS + FALSE_WORDS:
            raise OptionError(f"option {name} must be true or false, not {text!r}", name)
        value = word.lower() in TRUE_WORDS
    elif f.kind in ("int", "float"):
        try:
            value = int(word) if f.kind == "int" else float(word)
        except ValueError:
            noun = "a whole number" if f.kind == "int" else "a number"
            raise OptionError(f"option {name} must be {noun}, not {text!r}", name) from None
    elif f.kind == "str":
        value = text
    elif f.kind == "choice":
        matches = [c for c in f.choices if str(c) == word]
        if not matches:
            raise OptionError(f"option {name} must be one of {', '.join(map(repr, f.choices))}, not {text!r}", name)
        value = matches[0]
    else:
        raise OptionError(f"option {name} cannot be set from text", name)
    check_value(cls, name, value, ranges=ranges, default_int_range=default_int_range)
    return value


def from_strings(cls: type[T], items: Iterable[tuple[str, str]], *, base: T | None = None,
                 ranges: Mapping[str, Range] | None = None, default_int_range: Range = (0, None)) -> T:
    """The dataclass ``cls`` made from ``(name, text)`` pairs (each through ``convert``; a later
    pair wins over an earlier one of the same name), other fields at their defaults; or, with
    ``base``, a copy of ``base`` with those fields changed (``base`` itself is left alone).
    The first bad pair raises ``OptionError``."""
    values = {name: convert(cls, name, text, ranges=ranges, default_int_range=default_int_range)
              for name, text in items}
    if base is not None:
        return dataclasses.replace(base, **values)  # type: ignore[type-var]
    return cls(**values)
