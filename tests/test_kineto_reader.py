"""The streaming reader against the standard library's json.load: the same events for any
chunk size (chunk boundaries anywhere), plain and gzipped; one-line errors on bad files."""

import gzip
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.errors import RingtreeError
from ringtree.kineto import reader
from ringtree.kineto.reader import TraceFile

EVENT = st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "M", "i"]), "name": st.text(max_size=12),
    "ts": st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
    "args": st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8),
                            max_size=3),
})


def _events(path):
    f = TraceFile(path)
    return list(f.events()), f.header


@given(events=st.lists(EVENT, max_size=20), chunk=st.integers(1, 64), gz=st.booleans(),
       events_first=st.booleans())
def test_same_events_as_json_load_for_any_chunk_size(tmp_path_factory, events, chunk, gz,
                                                     events_first):
    path = tmp_path_factory.mktemp("t") / ("t.json.gz" if gz else "t.json")
    head = {"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 4}}
    doc = {"traceEvents": events, **head} if events_first else {**head, "traceEvents": events}
    text = json.dumps(doc, indent=1)
    with gzip.open(path, "wt") if gz else open(path, "w") as f:
        f.write(text)
    old = reader.CHUNK
    reader.CHUNK = chunk
    try:
        got, header = _events(path)
    finally:
        reader.CHUNK = old
    assert got == json.loads(text)["traceEvents"]
    assert header == head


def test_a_bare_array_and_a_trailing_comma(tmp_path):
    p = tmp_path / "a.json"
    p.write_text('[{"ph": "X", "ts": 1}, {"ph": "X", "ts": 2},\n]')
    assert [e["ts"] for e in _events(p)[0]] == [1, 2]


def test_a_number_cut_by_a_chunk_boundary_is_read_whole(tmp_path, monkeypatch):
    p = tmp_path / "n.json"
    p.write_text('{"schemaVersion": 123456789, "traceEvents": []}')
    monkeypatch.setattr(reader, "CHUNK", 20)  # '{"schemaVersion": 12' | '3456789'
    assert _events(p)[1]["schemaVersion"] == 123456789


@pytest.mark.parametrize(("text", "message"), [
    ('{"traceEvents": [{"name": "x"', "is truncated"),
    ('{"traceEvents": [{"name": "x', "is truncated"),
    ('{"hello": 1}', "is not a Kineto trace: it has no traceEvents (its keys: hello)"),
    ('{"traceEvents": [{"name": "x"}} ', "is not valid JSON: expected ',' or ']' at character"),
    ("garbage", "does not start with a JSON object or array"),
    ('{"traceEvents": []} tail', "text after the end of the trace"),
    ('{"traceEvents": [{"a": nul}]}', "is not valid JSON"),
])
def test_bad_files_are_one_line_errors(tmp_path, text, message):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(RingtreeError) as e:
        _events(p)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_not_gzip_not_utf8_and_missing(tmp_path):
    p = tmp_path / "b.json.gz"
    p.write_bytes(b"\x1f\x8b" + b"\x00" * 40)
    with pytest.raises(RingtreeError, match="not readable gzip"):
        _events(p)
    q = tmp_path / "c.json"
    q.write_bytes(b'{"traceEvents": ["\xff\xfe"]}')
    with pytest.raises(RingtreeError, match="not UTF-8"):
        _events(q)
    with pytest.raises(RingtreeError, match="cannot read trace"):
        TraceFile(tmp_path / "nope.json")


def test_progress_reaches_the_file_size(tmp_path, monkeypatch):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "ts": i} for i in range(500)]}))
    monkeypatch.setattr(reader, "CHUNK", 256)
    seen = []
    list(TraceFile(p, seen.append).events())
    assert seen == sorted(seen) and seen[-1] == p.stat().st_size and len(seen) > 10
