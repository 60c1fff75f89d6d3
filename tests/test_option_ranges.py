"""Every option of every method has a finite range or says what it names (issue 30, items 1 and 3):
a new numeric option without a high bound, or a new text option that may be a path without a
``resource`` mark, fails here."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import pytest

from hopqa.methods.base import (
    DEFAULT_INT_RANGE,
    METHODS,
    OPTION_RANGES,
    MethodError,
    get_method_class,
    method_config,
    option_range,
    parse_option,
)
from hopqa.options import RESOURCE_KINDS, OptionError, check_value, field_kind, numbers_of, path_reason, resource_fields

#: Text options that name nothing outside the process, each with why. A new ``str`` field must be
#: added here or marked ``metadata={"resource": ...}``.
NOT_RESOURCES = {
    ("ToRConfig", "widths"): "children per level, a list of numbers (ranged item by item)",
}


def configs() -> list[type]:
    return list(dict.fromkeys(get_method_class(name).Config for name in sorted(METHODS)))


def all_fields() -> list[tuple[type, dataclasses.Field]]:
    return [(cls, f) for cls in configs() for f in dataclasses.fields(cls)]


def is_numeric(cls: type, f: dataclasses.Field) -> bool:
    return field_kind(cls, f.name) in ("int", "float") or f.metadata.get("items") == "int"


def test_every_numeric_option_declares_a_finite_range():
    missing = []
    for cls, f in all_fields():
        if not is_numeric(cls, f):
            continue
        bounds = option_range(cls, f.name)
        if bounds is None or any(b is None or not math.isfinite(b) for b in bounds) or bounds[0] > bounds[1]:
            missing.append(f"{cls.__name__}.{f.name}: {bounds}")
    assert missing == []
    assert all(b is not None and math.isfinite(b) for b in DEFAULT_INT_RANGE)
    assert all(high is not None for _, high in OPTION_RANGES.values())


def test_every_text_option_is_a_resource_or_known_not_to_be():
    unmarked = []
    for cls, f in all_fields():
        if field_kind(cls, f.name) in ("str", "any") and f.name not in resource_fields(cls) \
                and (cls.__name__, f.name) not in NOT_RESOURCES:
            unmarked.append(f"{cls.__name__}.{f.name}")
    assert unmarked == [], "mark it field(metadata={'resource': ...}) or list it in NOT_RESOURCES"
    for cls, f in all_fields():
        assert f.metadata.get("resource") in (None, *RESOURCE_KINDS)


def test_every_default_is_within_its_range():
    for name in sorted(METHODS):
        config = method_config(name)
        for f in dataclasses.fields(config):
            if is_numeric(type(config), f):
                low, high = option_range(type(config), f.name)
                assert all(low <= n <= high for n in numbers_of(type(config), f.name, getattr(config, f.name)))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_value_past_the_high_bound_is_refused(name):
    cls = get_method_class(name).Config
    for f in dataclasses.fields(cls):
        if field_kind(cls, f.name) == "int":
            high = option_range(cls, f.name)[1]
            with pytest.raises(MethodError, match=f.name):
                method_config(name, **{f.name: int(high) + 1})
            with pytest.raises(MethodError, match=f.name):
                parse_option(cls, f.name, str(10**12))
            assert method_config(name, **{f.name: int(high)})  # the bound itself is allowed


def test_the_issue_s_values_are_refused():
    for name, options in [("hgot", {"max_steps": 10**9}), ("hgot", {"samples": 1000000}),
                          ("cot", {"max_tokens": 10**12}), ("leapquery", {"votes": 10**6}),
                          ("self-dc", {"depth": 11}), ("gensco-max", {"seed": 2**32})]:
        with pytest.raises(MethodError):
            method_config(name, **options)
    assert method_config("gensco-max", seed=2**32 - 1).seed == 2**32 - 1


def test_a_list_of_numbers_is_checked_item_by_item():
    assert method_config("tor", widths="5, 3,3").widths == "5, 3,3"
    for bad in ("101", "5,0", "x", "", "5,-1", "²", "9" * 40):
        with pytest.raises(MethodError, match="widths"):
            method_config("tor", widths=bad)
    assert numbers_of(get_method_class("tor").Config, "widths", "5,3,3") == [5, 3, 3]


def test_a_third_party_config_gets_a_finite_default_range():
    @dataclass
    class Mine:
        steps: int = 3
        folder: str = field(default="", metadata={"resource": "directory"})

    check_value(Mine, "steps", 5, default_int_range=DEFAULT_INT_RANGE)
    with pytest.raises(OptionError, match="between 0 and 10000"):
        check_value(Mine, "steps", 10**9, default_int_range=DEFAULT_INT_RANGE)
    assert resource_fields(Mine) == {"folder": "directory"}


@pytest.mark.parametrize("text", ["../../etc/passwd", "/etc/shadow", "file:///etc/passwd", "~/x", "~",
                                  "http://169.254.169.254/", "C:\\x", "c:x", "a\\b", "a\x00b", "a\nb", "..",
                                  "./x", "x/y", "FILE:passwd", "https:host", "x/../y"])
def test_path_like_text_is_never_a_name(text):
    assert path_reason(text) is not None
    assert path_reason(text, "model") is not None or text == "x/y"


@pytest.mark.parametrize("text", ["hotpotqa:train", "musique", "my_questions.jsonl", "llm", "bi-encoder",
                                  "2wikimultihopqa:dev"])
def test_plain_names_are_names(text):
    assert path_reason(text) is None


def test_a_model_may_be_an_owner_slash_name():
    assert path_reason("cross-encoder/ms-marco-MiniLM-L-6-v2", "model") is None
    assert path_reason("cross-encoder/ms-marco-MiniLM-L-6-v2", "dataset") is not None
    for text in ("a/b/c", "/a", "a/", ".a/b", "a/.b", "../b", "a/..", "~a/b"):
        assert path_reason(text, "model") is not None, text


def test_an_unknown_resource_kind_is_a_mistake():
    @dataclass
    class Wrong:
        where: str = field(default="", metadata={"resource": "file"})

    with pytest.raises(ValueError, match="resource must be one of"):
        resource_fields(Wrong)


def test_the_docs_list_every_numeric_and_resource_option():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "methods" / "index.md").read_text(encoding="utf-8")
    start = text.index("## Option ranges and resource options\n")
    end = text.find("\n## ", start + 1)
    section = text[start: end if end >= 0 else len(text)]
    names = {f.name for cls, f in all_fields() if is_numeric(cls, f) or f.name in resource_fields(cls)}
    assert sorted(n for n in names if f"`{n}`" not in section) == []
