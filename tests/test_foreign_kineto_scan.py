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


@pytest.mark.parametrize("trap", [False, True], ids=["boundary", "look-alike-in-args"])
def test_a_large_array_scanned_in_two_halves_is_the_same_table(monkeypatch, trap):
    """Above ``SPLIT_BYTES`` the array is scanned from its start and from an event boundary past
    its middle at once; the halves are joined only when the first half stops exactly there. Args
    holding what looks like a boundary (a list of objects with a `name`) must not split anything."""
    from tfprof.ingest.foreign import trace_columns

    args = ',"args":{"list":[' + ", ".join(['{"name":"a"}'] * 20) + "]}" if trap else ""
    events = [f'{{"ph":"X","name":"op{k}","cat":"cpu_op","pid":1,"tid":1,"ts":{k}.5,"dur":0.25{args}}}'
              for k in range(400)]
    data = ('{"traceEvents": [' + ", ".join(events) + "]}").encode()
    monkeypatch.setattr(trace_columns, "SPLIT_BYTES", 1 << 62)
    (_, whole), _ = both(data)
    monkeypatch.setattr(trace_columns, "SPLIT_BYTES", 64)
    calls = []
    real = trace_columns._scan
    monkeypatch.setattr(trace_columns, "_scan", lambda body, start: calls.append(1) or real(body, start))
    (_, halves), (_, ref) = both(data)
    assert calls and same(halves, whole) and same(halves, ref)
    assert halves.num_rows == 400
    body = np.frombuffer(data, np.uint8)
    start = data.index(b"[") + 1
    cut = trace_columns._NEXT_EVENT.search(body.data, start + (len(body) - start) // 2).start(1)
    head = kineto_events.scan(body, start, 16, cut, SLOTS)  # the first half stops at the cut only at a true boundary
    assert (head[0] == kineto_events.SPLIT) == (not trap)
