"""Corpus files: jsonl and tsv, malformed lines, dedupe, fingerprints."""

from __future__ import annotations

import warnings

import pytest

from hopqa.corpus import (
    CorpusStats,
    corpus_fingerprint,
    dedupe,
    file_stat,
    read_corpus,
    write_corpus,
)
from hopqa.types import Passage


def test_jsonl_with_aliases_and_bad_lines(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(
        '{"id": 1, "title": "T", "text": "x"}\n'  # 1
        "\n"  # 2: blank, ignored silently
        '{"contents": "y"}\n'  # 3: no id -> line number
        "[1, 2]\n"  # 4: not an object
        "{broken\n"  # 5: bad JSON
        '{"id": "e", "text": "  "}\n'  # 6: empty text
        '{"id": "f", "title": "B", "body": "z"}\n'  # 7
        '{"id": "g", "title": "no text"}\n'  # 8: no text
    )
    stats = CorpusStats()
    with pytest.warns(UserWarning) as record:
        got = list(read_corpus(p, stats))
    assert [(g.id, g.title, g.text) for g in got] == [("1", "T", "x"), ("3", "", "y"), ("f", "B", "z")]
    assert stats.read == 3 and stats.skipped == 4
    messages = [str(w.message) for w in record]
    for line in (4, 5, 6, 8):
        assert any(f"c.jsonl:{line}:" in m for m in messages), line
    assert "c.jsonl:5" in stats.problems[1] and "not JSON" in stats.problems[1]


def test_many_bad_lines_are_counted_but_warned_about_sparingly(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text("junk\n" * 50 + '{"text": "ok"}\n')
    stats = CorpusStats()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert len(list(read_corpus(p, stats))) == 1
    # 20 individual warnings + "more malformed lines" + the count at the end
    assert stats.skipped == 50 and len(record) == 22
    assert "50 malformed lines skipped in all (30 not shown one by one)" in str(record[-1].message)


def test_tsv_dpr_format(tmp_path):
    p = tmp_path / "c.tsv"
    p.write_text('id\ttext\ttitle\n7\tsome text\tA title\nbad-line\n8\tmore\n9\t"quoted\ttext"\tQ\n')
    stats = CorpusStats()
    with pytest.warns(UserWarning, match=r"c\.tsv:3"):
        got = list(read_corpus(p, stats))
    assert [(g.id, g.title, g.text) for g in got] == [
        ("7", "A title", "some text"), ("8", "", "more"), ("9", "Q", "quoted\ttext")]
    assert stats.skipped == 1


def test_tsv_without_header(tmp_path):
    p = tmp_path / "c.tsv"
    p.write_text("1\tfirst passage\tOne\n2\tsecond passage\tTwo\n")
    assert [g.id for g in read_corpus(p)] == ["1", "2"]


def test_missing_file_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no corpus file"):
        list(read_corpus(tmp_path / "none.jsonl"))


def test_dedupe_keeps_first_and_makes_ids_unique():
    out = dedupe([
        Passage("a", "T", "x  y"),
        Passage("b", "T", "x y"),  # same as the first after whitespace normalisation
        Passage("a", "U", "z"),  # same id, other text: renamed
        Passage("a~2", "V", "w"),  # would collide with the renamed one
        Passage("c", "T", "w", is_supporting=True),
    ])
    assert [p.id for p in out] == ["a", "a~2", "a~2~2", "c"]
    assert [p.text for p in out] == ["x  y", "z", "w", "w"]
    assert out[-1].is_supporting is True


def test_write_read_round_trip_and_fingerprint(tmp_path):
    ps = [Passage("1", "T", "text one"), Passage("2", "", "text two")]
    f = tmp_path / "c.jsonl"
    assert write_corpus(ps, f) == 2
    assert list(read_corpus(f)) == ps
    fp, st = corpus_fingerprint(f), file_stat(f)
    assert len(fp) == 64 and corpus_fingerprint(f) == fp
    f.write_text(f.read_text() + '{"id": "3", "text": "t"}\n')
    assert corpus_fingerprint(f) != fp and file_stat(f) != st


@pytest.mark.parametrize("suffix,content", [
    (".jsonl", b'{"id": "1", "text": "caf\xe9"}\n{"id": "2", "text": "fine"}\n{"id": "3", "text": "\xff\xfe bad"}\n'),
    (".tsv", b"1\tcaf\xe9\tT\n2\tfine\tU\n3\t\xff\xfe bad\tV\n"),
])
def test_invalid_utf8_is_replaced_and_warned_about_once_per_file(tmp_path, suffix, content):
    p = tmp_path / f"c{suffix}"
    p.write_bytes(content)
    stats = CorpusStats()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = list(read_corpus(p, stats))
    assert [g.text for g in got] == ["caf\ufffd", "fine", "\ufffd\ufffd bad"]
    assert stats.invalid_utf8 == 2 and stats.skipped == 0
    assert [str(w.message) for w in record] == [
        (f"{p}:1: invalid UTF-8, read as U+FFFD; later invalid lines of this file are read the same way "
         "without a warning")]
    other = tmp_path / f"d{suffix}"  # the same stats reading another file: warned about again
    other.write_bytes(content)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        list(read_corpus(other, stats))
    assert [str(w.message).split(": ")[0] for w in record] == [f"{other}:1"] and stats.invalid_utf8 == 4


def test_valid_utf8_and_replacement_characters_in_the_file_are_not_warned_about(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "Zürich \ufffd already"}\n', encoding="utf-8-sig")  # a BOM, a real U+FFFD
    stats = CorpusStats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [g.text for g in read_corpus(p, stats)] == ["Zürich \ufffd already"]
    assert stats.invalid_utf8 == 0
