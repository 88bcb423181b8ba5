"""The Chrome-trace scanner (``kineto_scan``, ``kineto_events``) against Python's ``json``: on each
edge case the numba path and the reference path give the same events table, and its values are
what ``json.loads`` reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tfprof import kernels
from tfprof.errors import ProfileFormatError
from tfprof.ingest.foreign import kineto_events, trace_json
from tfprof.ingest.foreign.trace_layout import SLOTS

EVENTS = [
    '{"ph":"X","name":"tab\\there \\"q\\" \\u00e9\\/","cat":"cpu_op","pid":1,"tid":"7","ts":1e-3,"dur":2}',
    '{"ph":"X","name":"caf\u00e9 \u6f22","ts":-12.5,"dur":0.0001,"pid":-3,"tid":1.50,"id":"0x1f"}',
    '{"ph":"X","ts":4761041048097.145,"dur":12345678901234567890,"pid":1.5e3,"tid":true,"id":null}',
    '{"ph": "X" , "ts" : 3 ,\n "args" : { "a" : [1, {"b": [2.50, "x y"]}], "Bytes": 4.0, "device": 0,\n'
    ' "correlation": 99999999999999999999, "name": "n\\u0041me", "x": -0, "y": 1E5, "z": 0.00001}}',
    '{"ph":"C","name":"util","ts":4,"args":{"x":NaN,"y":Infinity,"z":-Infinity,"Total Allocated":NaN}}',
    '{"ph":"i","name":"[memory]","ts":5,"args":{"Bytes":-1024,"Total Reserved":1.25,"device":{"k":1}}}',
    '{"ph":"X","ts":"6.5","dur":NaN,"args":null,"s":"t","bp":"e"}',
    '{"ph":"X","ts":7,"ts":8,"name":"first","name":"last","args":{"device":2}}',
    '{"ph":"X","ts":9,"dur":0.30000000000000004,"args":[1,2],"pid":{"a":[1]},"extra":{"deep":[[[]]]}}',
    '{}',
    '{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"thread 1 (python)"}}',
    '{"ph":"X","ts":1,"args":{"a":[1],"b":2,"a":[3],"device":1,"device":2}}',  # a repeated key
    '{"ph":"X","ts":1,"args":{"o":{"k":1,"j":{"k":0},"m":2},"p":[{"k":1},{"k":2}],"k":3}}',  # no key repeats
    '{"ph":"X","ts":1,"args":{"o":[{"k":1,"k":2}]},"args":{"x":{"y":1}}}',  # a second args object
]


def both(data: bytes) -> tuple:
    path = Path("scan.json")
    with kernels.using(True):
        fast = trace_json.read_events(path, data)
    with kernels.using(False):
        ref = trace_json.read_events(path, data)
    return fast, ref


def same(fast, ref) -> bool:
    """Equal tables, NaN equal to NaN."""
    def rows(table):
        return [{k: "nan" if v != v else v for k, v in r.items()} for r in table.to_pylist()]

    return fast.schema == ref.schema and rows(fast) == rows(ref)


@pytest.mark.parametrize("text", EVENTS)
def test_each_event_matches_the_reference(text):
    (_, fast), (_, ref) = both(('{"traceEvents": [' + text + "]}").encode())
    assert same(fast, ref), (fast.to_pylist(), ref.to_pylist())


def test_values_are_what_json_reads():
    (_, fast), (_, ref) = both(('{"traceEvents": [' + ",\n".join(EVENTS) + "]}").encode())
    assert same(fast, ref)
    rows = fast.to_pylist()
    for text, row in zip(EVENTS, rows):
        event = json.loads(text)
        if isinstance(event.get("ts"), (int, float)):
            assert row["ts"] == float(event["ts"]) or row["ts"] != row["ts"]
        if isinstance(event.get("name"), str):
            assert row["name"] == event["name"]
        if isinstance(event.get("args"), dict):
            assert json.loads(row["args"].replace("99999999999999999999", "1e+20")) is not None
    assert rows[0]["ts"] == 0.001 and rows[0]["tid"] == "7" and rows[0]["pid"] == "1"
    assert rows[1]["tid"] == "1.5" and rows[1]["pid"] == "-3"
    assert rows[2]["ts"] == 4761041048097.145 and rows[2]["dur"] == 1.2345678901234567e19
    assert rows[2]["tid"] == "true" and rows[2]["id"] is None and rows[2]["pid"] == "1500.0"
    assert rows[3]["arg:Bytes"] == "4.0" and rows[3]["arg:device"] == "0" and rows[3]["arg:name"] == "nAme"
    assert rows[3]["arg:correlation"] == "1e+20"
    assert rows[3]["args"].startswith('{"a":[1,{"b":[2.5,"x y"]}],"Bytes":4.0,')
    assert rows[4]["arg:Total Allocated"] == "NaN" and '"z":-Infinity' in rows[4]["args"]
    assert rows[5]["arg:device"] == '{"k":1}' and rows[5]["arg:Total Reserved"] == "1.25"
    assert rows[6]["ts"] == 6.5 and rows[6]["args"] is None
    assert rows[7]["ts"] == 8.0 and rows[7]["name"] == "last" and rows[7]["arg:device"] == "2"
    assert rows[8]["dur"] == 0.30000000000000004 and rows[8]["args"] == "[1,2]" and rows[8]["pid"] == '{"a":[1]}'


@pytest.mark.parametrize("tail", ["]", "", ",", "\n"])
def test_array_form_with_and_without_its_closing_bracket(tail):
    data = ("[" + ",".join(EVENTS[:3]) + tail).encode()
    with kernels.using(True):
        top, fast = trace_json.read_events(Path("open.json"), data)
    (_, ref), _ = both(("[" + ",".join(EVENTS[:3]) + "]").encode())
    assert top == {} and fast.num_rows == 3 and same(fast, ref)


@pytest.mark.parametrize(("text", "phrase"), [
    ('{"traceEvents": [{"ph": "X", "name": "cut', "ends inside a string"),
    ('{"traceEvents": [{"ph": "X", "ts": 12', "ends before the events array does"),
    ('{"traceEvents": [{"ph": "X"}, ', "ends before the events array does"),
    ('{"traceEvents": [{"ph": "X" "ts": 1}]}', "invalid JSON"),
    ('{"traceEvents": [{"ph": "X", "ts": 01}]}', "invalid JSON"),
    ('{"traceEvents": [{"ph": "X"}, 5]}', "not an event object"),
    ('{"traceEvents": [{"ph": "X", "ts": "soon"}]}', "not a number"),
])
def test_bad_events_are_one_line_errors(text, phrase):
    with kernels.using(True), pytest.raises(ProfileFormatError) as info:
        trace_json.read_events(Path("bad.json"), text.encode())
    assert phrase in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("args", "repeats"), [
    ('{"a":1,"b":{"a":2,"c":[{"a":3},{"a":4}]},"c":5}', False),
    ('{"a":1,"b":2,"a":3}', True),
    ('{"x":[{"k":1,"j":[],"k":2}]}', True),
    ('{' + ",".join(f'"k{i}":{i}' for i in range(5000)) + '}', True),  # more keys than it tracks
])
def test_args_with_a_repeated_key_go_to_python(args, repeats):
    """Python's ``json`` keeps a repeated key's last value in its first place, so those args are
    decoded in Python; the same key in different objects is no repeat and stays on the fast path."""
    from tfprof.ingest.foreign.trace_layout import PYTHON

    data = ('[{"ph":"X","ts":1,"args":' + args + "}]").encode()
    flags = kineto_events.scan(np.frombuffer(data, np.uint8), 1, 4, -1, SLOTS)[-1]
    assert bool(flags[0] & PYTHON) == repeats
    (_, fast), (_, ref) = both(b'{"traceEvents": ' + data + b"}")
    assert same(fast, ref)


def test_many_events_grow_the_arrays():
    events = [f'{{"ph":"X","name":"op{i % 7}","ts":{i}.25,"dur":1,"pid":1,"tid":{i % 3},'
              f'"args":{{"correlation":{i}}}}}' for i in range(5000)]
    (_, fast), (_, ref) = both(('{"traceEvents":[' + ",".join(events) + "]}").encode())
    assert fast.num_rows == 5000 and fast.equals(ref)
    assert fast["arg:correlation"].to_pylist()[4999] == "4999"


def _windowed(trap: bool = False, count: int = 400) -> bytes:
    """A trace whose names, threads and categories first appear in different windows, with
    events Python decodes (an escape) and non-ASCII text among them."""
    args = ',"args":{"list":[' + ", ".join(['{"name":"a"}'] * 20) + "]}" if trap else ',"args":{"device": 0}'
    events = [f'{{"ph":"X","name":"op{k % 13 if k % 50 else k}","cat":"c{k % 7}","pid":1,"tid":{k // 90},'
              f'"ts":{k}.5,"dur":0.25{args}}}' for k in range(count)]
    events[77] = events[77].replace('"name":"op', '"name":"\\u00e9 op')
    events[301] = events[301].replace('"name":"op', '"name":"\u6f22 op')
    return ('{"traceEvents": [' + ", ".join(events) + "]}").encode()


@pytest.mark.parametrize("trap", [False, True], ids=["boundary", "look-alike-in-args"])
def test_windows_give_the_table_of_one(monkeypatch, trap):
    """The array is scanned and gathered a window of ``WINDOW_BYTES`` at a time, each window
    ending at what looks like an event boundary: with windows of a few events, the table is the
    one a single window gives and the reference's, the names coded in order of first appearance
    in the whole file; args holding what looks like a boundary leave the rest to one window."""
    from tfprof.ingest.foreign import trace_columns

    data = _windowed(trap)
    monkeypatch.setattr(trace_columns, "WINDOW_BYTES", 1 << 62)
    (_, whole), _ = both(data)
    monkeypatch.setattr(trace_columns, "WINDOW_BYTES", 500)
    calls = []
    real = trace_columns._window
    monkeypatch.setattr(trace_columns, "_window", lambda *a: calls.append(1) or real(*a))
    (_, windowed), (_, ref) = both(data)
    assert windowed.num_rows == 400 and same(windowed, whole) and same(windowed, ref)
    assert (len(calls) > 50) == (not trap)
    for name in ("name", "cat", "tid"):
        assert windowed[name].chunk(0).dictionary.equals(ref[name].chunk(0).dictionary)
        assert windowed[name].chunk(0).indices.equals(ref[name].chunk(0).indices)
    body = np.frombuffer(data, np.uint8)
    start = data.index(b"[") + 1
    cut = trace_columns._NEXT_EVENT.search(body.data, start + 500).start(1)
    head = kineto_events.scan(body, start, 16, cut, SLOTS)  # a window stops at the cut only at a true boundary
    assert (head[0] == kineto_events.SPLIT) == (not trap)


@pytest.mark.parametrize("bom", [b"", trace_json.BOM])
def test_a_mapped_file_reads_as_its_bytes(monkeypatch, tmp_path, bom):
    """A file mapped (``sources.read_mapped``), its windows dropped from memory as they are
    gathered, gives the table its bytes give; so do its errors, a scan error (here the file
    cut short) coming before an event Python cannot decode in an earlier window."""
    from tfprof.ingest.foreign import trace_columns
    from tfprof.ingest.sources import read_mapped

    monkeypatch.setattr(trace_columns, "WINDOW_BYTES", 500)
    data = bom + _windowed()
    path = tmp_path / "mapped.json"
    path.write_bytes(data)
    with kernels.using(True):
        top, mapped = trace_json.read_events(path, [read_mapped(path, "profile")])
        assert same(mapped, trace_json.read_events(path, data)[1])
        undecodable = data.replace(b'"name":"\\u00e9 op', b'"name":"\\u00e9\xff')  # invalid UTF-8, with an escape
        for bad in (data[:-900], undecodable, undecodable[:-900]):
            path.write_bytes(bad)
            with pytest.raises(ProfileFormatError) as got:
                trace_json.read_events(path, [read_mapped(path, "profile")])
            monkeypatch.setattr(trace_columns, "WINDOW_BYTES", 1 << 62)
            with pytest.raises(ProfileFormatError) as want:
                trace_json.read_events(path, bad)
            monkeypatch.setattr(trace_columns, "WINDOW_BYTES", 500)
            assert str(got.value) == str(want.value)


def test_a_file_read_in_windows_gives_every_table_of_one(monkeypatch):
    """Read in windows of 64 KB (the args then a chunk per window, freed by the trace table as
    it gathers them in start order), a Kineto trace gives every table it gives read whole."""
    from tfprof.ingest import foreign
    from tfprof.ingest.foreign import trace_columns

    path = Path(__file__).parent / "fixtures" / "foreign" / "torch_cnn.pt.trace.json"
    with kernels.using(True):
        whole = foreign.read(path, "kineto")
        monkeypatch.setattr(trace_columns, "WINDOW_BYTES", 1 << 16)
        assert trace_json.read_events(path, path.read_bytes())[1]["args"].num_chunks >= 8
        windowed = foreign.read(path, "kineto")
    assert sorted(windowed) == sorted(whole)
    for name, table in whole.items():
        assert windowed[name].equals(table), name


def test_chunked_args_are_gathered_as_one_array(monkeypatch):
    """``texts_at`` over args in chunks, taken over (each chunk freed past its last use), gives
    what it gives over the same args in one array: nulls, empty strings and repeats kept."""
    import pyarrow as pa

    from tfprof.ingest.foreign import trace_table

    rng = np.random.default_rng(5)
    values = [None if k % 11 == 3 else "" if k % 7 == 2 else f'{{"k":{k}}}' * (k % 5) for k in range(1000)]
    at = np.concatenate([rng.permutation(1000)[:900], rng.integers(0, 1000, 50)])
    monkeypatch.setattr(trace_table, "BLOCK", 16)
    with kernels.using(True):
        one = trace_table.texts_at(pa.array(values, pa.string()), at)
        chunked = pa.chunked_array([pa.array(values[k:k + 97], pa.string()) for k in range(0, 1000, 97)])
        taken = trace_table.texts_at([chunked], at)
    assert taken.equals(one) and one.to_pylist() == [values[k] for k in at]


# epoch µs with their ns as three decimals (19 digits), in every form a ts may take
EPOCH_TS = ["1712195495519689.047", "1712195495519695.812", "1712195495519698.0", "1712195495519699",
            '"1712195495519701.999"', "1712195495519702.0070", "1.712195495519703e15", "-5.25",
            "1712195495519704.5"]


@pytest.mark.parametrize("window", [1 << 62, 150], ids=["whole", "windows"])
def test_epoch_times_keep_their_ns(tmp_path, monkeypatch, window):
    """A float of an epoch time in µs is off by up to 125 ns (its ulp is 0.25 µs): each ``ts`` is
    read from the first one's whole µs, in whole ns, so that every start is the file's to the ns,
    on both engines, a window at a time too; forms the scan does not read (a string, an exponent,
    an escape elsewhere in the event) are decoded by Python just as exactly."""
    from decimal import Decimal

    import polars as pl

    from tfprof.ingest import foreign
    from tfprof.ingest.foreign import trace_columns

    monkeypatch.setattr(trace_columns, "WINDOW_BYTES", window)
    escape = "\\u0041"  # an escape sends its event to Python
    events = [f'{{"ph":"X","cat":"cpu_op","name":"op{k}{escape if k == 3 else ""}","pid":1,"tid":1,"ts":{ts},'
              f'"dur":0.5}}' for k, ts in enumerate(EPOCH_TS)]
    data = ('{"schemaVersion":1,"traceEvents":[' + ",".join(events) + "]}").encode()
    (_, fast), (_, ref) = both(data)
    assert same(fast, ref) and trace_columns.ts_origin(fast) == trace_columns.ts_origin(ref) == 1712195495519689
    want = [int(Decimal(ts.strip('"')) * 1000) for ts in EPOCH_TS]
    path = tmp_path / "epoch.pt.trace.json"
    path.write_bytes(data)
    for engine in (True, False):
        with kernels.using(engine):
            table = foreign.read(path, "kineto")["trace_events"]
        got = pl.from_arrow(table).sort("event_id")["start_ns"].to_list()
        assert got == want, engine
    assert [round(float(ts.strip('"')) * 1000) for ts in EPOCH_TS] != want  # what floats would give
