"""hopqa.options: text and values checked against typed dataclass fields (every rule of its docstring)."""

from __future__ import annotations

import ast
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from hopqa.config import FALSE_WORDS, TRUE_WORDS
from hopqa.options import (
    OptionError,
    check_value,
    convert,
    from_strings,
    unknown_option,
)


@dataclass
class Opts:
    flag: bool = False
    count: int = 3  # no range anywhere: the default int range (>= 0)
    k: int = field(default=5, metadata={"range": (2, 8)})
    rate: float = 0.5  # no range: unbounded
    temperature: float = field(default=0.0, metadata={"range": (0.0, 2.0)})
    timeout: float = field(default=60.0, metadata={"above": 0})
    window: float = field(default=1.0, metadata={"range": (0, 10), "above": 0})
    name: str = "x"
    source: Literal["paper", "bootstrap"] = "paper"
    mode: Literal["a", "b"] | None = None
    alpha: float | None = None
    limit: int | None = None
    label: str | None = None
    switch: bool | None = None
    tags: list[str] = field(default_factory=list)  # another type: not checked, not set from text
    anything: Any = None


def error(fn: Any, *args: Any, **kwargs: Any) -> OptionError:
    with pytest.raises(OptionError) as e:
        fn(*args, **kwargs)
    assert isinstance(e.value, ValueError) and "\n" not in str(e.value)
    return e.value


# -- check_value: types -------------------------------------------------------------------------
@pytest.mark.parametrize("name, value", [
    ("flag", True), ("flag", False), ("count", 0), ("count", 10**12), ("k", 2), ("k", 8), ("rate", -3.5),
    ("rate", 2), ("temperature", 0), ("temperature", 2.0), ("timeout", 0.001), ("window", 10), ("name", ""),
    ("source", "bootstrap"), ("mode", "b"), ("mode", None), ("alpha", None), ("alpha", 0.4), ("limit", None),
    ("limit", 7), ("label", None), ("label", "y"), ("switch", None), ("switch", True), ("tags", ["a"]),
    ("tags", "not checked"), ("anything", object()),
])
def test_values_that_suit_their_field(name, value):
    check_value(Opts, name, value)


@pytest.mark.parametrize("name, value, message", [
    ("flag", 1, "option flag must be true or false, not 1"),
    ("flag", "true", "option flag must be true or false, not 'true'"),
    ("flag", None, "option flag needs a value"),
    ("count", True, "option count must be a whole number, not True"),
    ("count", 2.0, "option count must be a whole number, not 2.0"),
    ("count", "3", "option count must be a whole number, not '3'"),
    ("count", None, "option count needs a value"),
    ("rate", float("nan"), "option rate must be a finite number, not nan"),
    ("rate", float("inf"), "option rate must be a finite number, not inf"),
    ("rate", False, "option rate must be a finite number, not False"),
    ("rate", "0.5", "option rate must be a finite number, not '0.5'"),
    ("name", 3, "option name must be text, not 3"),
    ("name", None, "option name needs a value"),
    ("source", "x", "option source must be one of 'paper', 'bootstrap', not 'x'"),
    ("source", None, "option source needs a value"),
    ("mode", "c", "option mode must be one of 'a', 'b', not 'c'"),
    ("alpha", "high", "option alpha must be a finite number, not 'high'"),
    ("limit", 1.5, "option limit must be a whole number, not 1.5"),
    ("switch", 0, "option switch must be true or false, not 0"),
])
def test_values_of_the_wrong_type(name, value, message):
    e = error(check_value, Opts, name, value)
    assert str(e) == message and e.name == name


def test_a_literal_choice_must_have_the_type_of_the_choice():
    @dataclass
    class Numbers:
        level: Literal[1, 2] = 1

    check_value(Numbers, "level", 2)
    assert "must be one of 1, 2, not True" in str(error(check_value, Numbers, "level", True))  # True == 1
    assert "must be one of 1, 2, not '1'" in str(error(check_value, Numbers, "level", "1"))
    assert convert(Numbers, "level", " 2 ") == 2


def test_none_among_the_choices_of_a_literal_makes_it_optional():
    @dataclass
    class Choice:
        pick: Literal["a", None] = None  # noqa: PYI061 - the spelling under test

    check_value(Choice, "pick", None)
    assert convert(Choice, "pick", "null") is None and convert(Choice, "pick", "a") == "a"


# -- check_value: ranges ------------------------------------------------------------------------
@pytest.mark.parametrize("name, value, message", [
    ("count", -1, "option count must be at least 0, not -1"),  # default_int_range
    ("k", 1, "option k must be at least 2, not 1"),  # the field's metadata range (a whole number: its low)
    ("k", 9, "option k must be between 2 and 8, not 9"),
    ("temperature", 7.0, "option temperature must be between 0.0 and 2.0, not 7.0"),
    ("temperature", -0.1, "option temperature must be between 0.0 and 2.0, not -0.1"),
    ("timeout", 0, "option timeout must be greater than 0, not 0"),  # exclusive lower bound
    ("timeout", -1.5, "option timeout must be greater than 0, not -1.5"),
    ("window", 0.0, "option window must be greater than 0 and at most 10, not 0.0"),  # above replaces low
    ("window", 10.5, "option window must be greater than 0 and at most 10, not 10.5"),
    ("limit", -2, "option limit must be at least 0, not -2"),  # an optional int has the int range too
])
def test_numbers_out_of_range(name, value, message):
    assert str(error(check_value, Opts, name, value)) == message


def test_where_a_range_comes_from():
    ranges = {"count": (1, None), "k": (0, 0), "rate": (None, 1.0), "alpha": (0.0, 1.0)}
    # the caller's table by name
    assert str(error(check_value, Opts, "count", 0, ranges=ranges)) == "option count must be at least 1, not 0"
    assert str(error(check_value, Opts, "rate", 1.5, ranges=ranges)) == "option rate must be at most 1.0, not 1.5"
    assert "between 0.0 and 1.0, not 1.2" in str(error(check_value, Opts, "alpha", 1.2, ranges=ranges))
    # the field's own metadata wins over the table
    check_value(Opts, "k", 5, ranges=ranges)
    # ints in no table: default_int_range; floats in no table: unbounded
    check_value(Opts, "count", -5, default_int_range=(None, None))
    assert str(error(check_value, Opts, "count", 11, default_int_range=(0, 10))) == \
        "option count must be between 0 and 10, not 11"
    check_value(Opts, "rate", -1e9)
    # a table entry for an int field replaces the default range
    check_value(Opts, "count", -1, ranges={"count": (-1, None)})


# -- unknown names ------------------------------------------------------------------------------
def test_an_unknown_name_gets_one_message_with_a_guess():
    e = error(check_value, Opts, "tempreature", 1.0)
    assert e.name == "tempreature"
    assert str(e) == ("unknown option 'tempreature' (did you mean 'temperature'?); known options: flag, count, k, "
                      "rate, temperature, timeout, window, name, source, mode, alpha, limit, label, switch, tags, "
                      "anything")
    assert str(error(convert, Opts, "zzz", "1")).startswith("unknown option 'zzz'; known options: flag, count")
    assert str(error(from_strings, Opts, [("flagg", "1")])).startswith("unknown option 'flagg' (did you mean 'flag'?)")
    assert str(unknown_option("retires", ["concurrency", "retries"])) == \
        "unknown option 'retires' (did you mean 'retries'?); known options: concurrency, retries"


# -- convert ------------------------------------------------------------------------------------
@pytest.mark.parametrize("word", TRUE_WORDS + tuple(w.upper() for w in TRUE_WORDS) + (" yes ",))
def test_true_words(word):
    assert convert(Opts, "flag", word) is True


@pytest.mark.parametrize("word", FALSE_WORDS + tuple(w.title() for w in FALSE_WORDS))
def test_false_words(word):
    assert convert(Opts, "flag", word) is False


@pytest.mark.parametrize("name, text, value", [
    ("count", " 12 ", 12), ("count", "0", 0), ("k", "2", 2), ("rate", "-3.5", -3.5), ("rate", "1e-3", 0.001),
    ("temperature", "2", 2.0), ("timeout", "0.25", 0.25), ("name", " spaced out ", " spaced out "),
    ("name", "", ""), ("name", "none", "none"),  # text is kept as given; None only for optional fields
    ("source", " bootstrap ", "bootstrap"), ("mode", "a", "a"),
    ("alpha", "0.4", 0.4), ("limit", "7", 7), ("label", "x", "x"), ("switch", "off", False),
])
def test_convert_text_to_the_field_type(name, text, value):
    got = convert(Opts, name, text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("name", ["mode", "alpha", "limit", "label", "switch"])
@pytest.mark.parametrize("text", ["", "  ", "none", "None", "NULL", " null "])
def test_nothing_none_and_null_unset_an_optional_field(name, text):
    assert convert(Opts, name, text) is None


@pytest.mark.parametrize("name, text, message", [
    ("flag", "perhaps", "option flag must be true or false, not 'perhaps'"),
    ("flag", "", "option flag must be true or false, not ''"),
    ("flag", "none", "option flag must be true or false, not 'none'"),  # not optional
    ("count", "x", "option count must be a whole number, not 'x'"),
    ("count", "3.5", "option count must be a whole number, not '3.5'"),
    ("count", "", "option count must be a whole number, not ''"),
    ("count", "-1", "option count must be at least 0, not -1"),
    ("k", "9", "option k must be between 2 and 8, not 9"),
    ("rate", "high", "option rate must be a number, not 'high'"),
    ("rate", "nan", "option rate must be a finite number, not nan"),
    ("temperature", "7", "option temperature must be between 0.0 and 2.0, not 7.0"),
    ("timeout", "0", "option timeout must be greater than 0, not 0.0"),
    ("source", "x", "option source must be one of 'paper', 'bootstrap', not 'x'"),
    ("source", "Paper", "option source must be one of 'paper', 'bootstrap', not 'Paper'"),
    ("mode", "c", "option mode must be one of 'a', 'b', not 'c'"),
    ("alpha", "high", "option alpha must be a number, not 'high'"),
    ("tags", "a,b", "option tags cannot be set from text"),
    ("anything", "x", "option anything cannot be set from text"),
])
def test_convert_refuses_bad_text(name, text, message):
    e = error(convert, Opts, name, text)
    assert str(e) == message and e.name == name


def test_convert_applies_the_callers_ranges():
    assert convert(Opts, "count", "-1", default_int_range=(-1, None)) == -1
    assert "at least 1, not 0" in str(error(convert, Opts, "count", "0", ranges={"count": (1, None)}))


# -- from_strings -------------------------------------------------------------------------------
def test_from_strings_builds_a_config():
    cfg = from_strings(Opts, [("flag", "yes"), ("k", "4"), ("source", "bootstrap"), ("alpha", "none"), ("k", "6")])
    assert (cfg.flag, cfg.k, cfg.source, cfg.alpha) == (True, 6, "bootstrap", None)  # the last k wins
    assert cfg.count == 3 and cfg.tags == []  # the others keep their defaults
    assert from_strings(Opts, []) == Opts()


def test_from_strings_updates_a_copy_of_base():
    base = Opts(count=9, name="kept")
    cfg = from_strings(Opts, [("rate", "0.25")], base=base)
    assert (cfg.rate, cfg.count, cfg.name) == (0.25, 9, "kept")
    assert base.rate == 0.5 and cfg is not base


def test_from_strings_stops_at_the_first_bad_pair():
    e = error(from_strings, Opts, [("k", "4"), ("k", "1"), ("count", "x")])
    assert e.name == "k" and str(e) == "option k must be at least 2, not 1"
    assert "at least 1" in str(error(from_strings, Opts, [("count", "0")], ranges={"count": (1, None)}))


def test_from_strings_runs_post_init():
    @dataclass
    class Checked:
        low: int = 1
        high: int = 2

        def __post_init__(self) -> None:
            if self.low > self.high:
                raise ValueError("low above high")

    with pytest.raises(ValueError, match="low above high"):
        from_strings(Checked, [("low", "3")])
    with pytest.raises(ValueError, match="low above high"):
        from_strings(Checked, [("low", "3")], base=Checked())


# -- the error ----------------------------------------------------------------------------------
def test_option_error_is_a_value_error_with_a_name_that_survives_pickling():
    e = error(convert, Opts, "count", "x")
    copy = pickle.loads(pickle.dumps(e))
    assert isinstance(copy, OptionError) and copy.name == "count" and str(copy) == str(e)


def test_options_imports_only_config_and_the_standard_library():
    import hopqa.options as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    outside = {name for name in imported if name.partition(".")[0] not in sys.stdlib_module_names}
    assert outside == {"hopqa.config"}
