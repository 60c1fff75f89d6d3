"""hopqa.jsonl: the resumable JSON-lines file of the evaluation runner and HGOT's bootstrap."""

from __future__ import annotations

import json
import threading

import pytest

from hopqa import jsonl


def _line(rec: dict) -> str:
    return json.dumps(rec) + "\n"


def test_read_newest_wins_at_first_position_and_skips_bad_middle_lines(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text(_line({"id": "a", "v": 1}) + "oops\n" + _line({"v": "no id"}) + _line({"id": "b", "v": 1})
                    + _line({"id": "a", "v": 2}))
    assert list(jsonl.read(path).items()) == [("a", {"id": "a", "v": 2}), ("b", {"id": "b", "v": 1})]
    assert jsonl.read(tmp_path / "missing.jsonl") == {}


def test_torn_last_line_is_not_read_and_repair_cuts_it(tmp_path):
    path = tmp_path / "f.jsonl"
    whole = _line({"id": "a"})
    for torn in ['{"id": "b", "to', '{"id": "b"}', "not json\n"]:  # cut mid-line, before its newline, garbage
        path.write_text(whole + torn)
        assert set(jsonl.read(path)) == {"a"} and path.read_text() == whole + torn  # reading alone changes nothing
        assert set(jsonl.read(path, repair=True)) == {"a"} and path.read_text() == whole


def test_keys_are_text_and_any_field_can_be_the_key(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text(_line({"id": 7, "name": "x"}))
    assert jsonl.read(path) == {"7": {"id": 7, "name": "x"}}
    assert jsonl.read(path, key="name") == {"x": {"id": 7, "name": "x"}}


def test_compact_is_atomic_and_idempotent(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text(_line({"id": "a", "v": 1}) + _line({"id": "b"}) + _line({"id": "a", "v": 2}) + '{"id": "c"')
    assert jsonl.compact(path).records == {"a": {"id": "a", "v": 2}, "b": {"id": "b"}}
    assert path.read_text() == _line({"id": "a", "v": 2}) + _line({"id": "b"})
    inode = path.stat().st_ino
    jsonl.compact(path)
    assert path.stat().st_ino == inode and [p.name for p in tmp_path.iterdir()] == ["f.jsonl"]


def test_appender_writes_whole_lines_from_many_threads(tmp_path):
    path = tmp_path / "f.jsonl"
    with jsonl.Appender(path) as out:
        threads = [threading.Thread(target=lambda i=i: [out.write({"id": f"{i}-{j}", "x": "é" * 50})
                                                         for j in range(50)]) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200 and len(jsonl.read(path)) == 200 and "é" in lines[0]  # ensure_ascii=False


def test_appender_starts_on_a_fresh_line_after_a_torn_one(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text(_line({"id": "a"}) + '{"id": "b", "to')
    with jsonl.Appender(path) as out:
        out.write({"id": "c"})
    assert path.read_text() == _line({"id": "a"}) + '{"id": "b", "to\n' + _line({"id": "c"})
    assert set(jsonl.read(path)) == {"a", "c"}
    with jsonl.Appender(path) as out:  # a whole file gets no blank line
        out.write({"id": "d"})
    assert path.read_text().endswith(_line({"id": "c"}) + _line({"id": "d"}))


def test_appender_default(tmp_path):
    path = tmp_path / "f.jsonl"
    with jsonl.Appender(path) as out:
        out.write({"id": "a", "p": tmp_path})  # str by default
    assert jsonl.read(path)["a"]["p"] == str(tmp_path)
    with jsonl.Appender(path, default=None) as out, pytest.raises(TypeError):
        out.write({"id": "b", "p": tmp_path})


def test_loads_bounds_nesting_and_makes_strings_valid_unicode():
    assert jsonl.loads("[" * 200 + "]" * 200) is not None
    for deep in ("[" * 201 + "]" * 201, '{"a": ' * 300 + "1" + "}" * 300, b"[" * 100_000 + b"]" * 100_000):
        with pytest.raises(ValueError, match="nested more than 200"):
            jsonl.loads(deep)
    assert jsonl.loads('["[[[[[[", "]]]"]' * 1) == ["[[[[[[", "]]]"]  # brackets inside strings do not count
    # past the bracket count the depth is measured: many shallow brackets, or brackets in strings, pass
    assert jsonl.too_deep("[" + "[]," * 500 + "[]]") is False
    assert jsonl.too_deep(b'["' + b"[" * 500 + b'"]') is False and jsonl.too_deep('["' + "{" * 500 + '"]') is False
    assert jsonl.too_deep(b"[" * 201 + b"]" * 201) is True and jsonl.too_deep("[" * 200 + "]" * 200) is False
    assert jsonl.loads('{"k\\ud800": ["a\\udfffb", "\\ud83d\\ude00"]}') == {"k\ufffd": ["a\ufffdb", "\U0001f600"]}
    obj, end = jsonl.raw_decode('say {"a": 1} then', 4)
    assert obj == {"a": 1} and end == 12
    with pytest.raises(ValueError):
        jsonl.raw_decode("x" + "[" * 500, 1)


def test_appender_writes_valid_utf8_for_lone_surrogates(tmp_path):
    path = tmp_path / "f.jsonl"
    with jsonl.Appender(path) as out:
        out.write({"id": "a", "text": "broken \ud800 reply"})
    assert path.read_bytes().decode("utf-8") == '{"id": "a", "text": "broken \ufffd reply"}\n'


@pytest.mark.parametrize("failure", ["full disk", "ctrl-c"])
def test_a_failed_append_leaves_the_file_as_it_was(tmp_path, monkeypatch, failure):
    import errno
    import os

    path = tmp_path / "f.jsonl"
    out = jsonl.Appender(path)
    out.write({"id": "a"})
    real = os.write

    def half_then_fail(fd, data):
        real(fd, bytes(data)[:5])
        if failure == "ctrl-c":
            raise KeyboardInterrupt
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonl.os, "write", half_then_fail)
    if failure == "ctrl-c":
        with pytest.raises(KeyboardInterrupt):
            out.write({"id": "b", "text": "x" * 100})
    else:
        with pytest.raises(jsonl.AppendError, match="No space left on device") as info:
            out.write({"id": "b", "text": "x" * 100})
        assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert path.read_text() == _line({"id": "a"})  # the half line was cut off again
    out.write({"id": "c"})
    out.close()
    assert set(jsonl.read(path)) == {"a", "c"}


def test_ctrl_c_during_the_sync_keeps_the_whole_line_and_goes_on(tmp_path, monkeypatch):
    import os

    path = tmp_path / "f.jsonl"
    out = jsonl.Appender(path)
    out.write({"id": "a"})
    real, calls = os.fsync, []

    def interrupted_once(fd):
        calls.append(fd)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real(fd)

    monkeypatch.setattr(jsonl.os, "fsync", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        out.write({"id": "b"})
    assert len(calls) == 2  # synced again before the interrupt goes on
    assert set(jsonl.read(path)) == {"a", "b"}  # a finished record is not cut off


def test_scan_streams_and_skips_a_line_longer_than_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "f.jsonl"
    path.write_text(_line({"id": "a"}) + _line({"id": "big", "x": "y" * 5000}) + _line({"id": "b"}))
    with pytest.warns(jsonl.RecordWarning, match=":2: skipped"):
        found = jsonl.scan(path)
    assert set(found.records) == {"a", "b"} and found.bad == 1 and found.good_end == path.stat().st_size
    start, end = found.spans["b"]
    assert path.read_bytes()[start:end] == _line({"id": "b"}).encode()


def test_bad_lines_are_warned_about_a_bounded_number_of_times(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text("oops\n" * 100 + _line({"id": "a"}))
    with pytest.warns(jsonl.RecordWarning) as record:
        assert set(jsonl.read(path)) == {"a"}
    assert len(record) == jsonl.MAX_WARNINGS + 1 and "100 bad lines skipped in all" in str(record[-1].message)
