"""The kernels' top-level key lookup in args texts gives what polars' ``json_path_match`` gives."""

from __future__ import annotations

import polars as pl
import pytest

from tfprof import kernels
from tfprof.ingest.foreign import json_keys

TEXTS = [
    '{"Input Dims":[[8,3,3,3],[8]],"Ev Idx":1}',
    '{"External id":5,"Input Dims":[],"Concrete Inputs":["","[1, 1]"]}',
    '{ "Input Dims" : [ [1, 2] , [] ] , "x": 1 }',  # whitespace around everything
    '{"a":{"Input Dims":[[9]]},"Input Dims":[[4]]}',  # the same key nested first: not the top-level one
    '{"a":{"Input Dims":[[9]]}}',  # only nested
    '{"Concrete Inputs":["}\\"]","Input Dims"],"Input Dims":[[2,2]]}',  # brackets, quotes, the key inside strings
    '{"Input Dims":null,"b":2}',
    '{"Input Dims":"[[1,2]]"}',  # a string: its characters
    '{"Input Dims":"caf\\u00e9"}',
    '{"Input Dims":12.5}',
    '{"Input Dims":[1.50,-0,1e2,-3]}',
    '{"Input Dims":["a b","\\\\"]}',
    '{"Input Dims":true}',
    '{"Input Dimsx":[[1]],"Input Dim":[[2]]}',  # keys that start alike
    '{"Input Dims":[[1]],"Input Dims":[[2]]}',  # repeated (the readers rewrite such args)
    '{"Input Dims":[[1]],"Input Dims":null}',
    '{"Input Dims":[["\\u00e9"]]}',
    '{"é":[1],"Input Dims":[[3,"é"]]}',
    "{}",
    "[1,2]",
    "not json",
    "",
    None,
]


@pytest.mark.parametrize("key", ["Input Dims", "Concrete Inputs", "a", "é"])
def test_the_kernel_finds_what_json_path_match_finds(key):
    texts = pl.Series("args", TEXTS, dtype=pl.String)
    with kernels.using(False):
        want = json_keys.values(texts, key)
    got = json_keys.values(texts, key)
    assert got.to_list() == want.to_list()
    assert got.name == key and got.dtype == pl.String


def test_sliced_and_chunked_texts():
    texts = pl.concat([pl.Series("args", TEXTS[:5]), pl.Series("args", TEXTS[5:])], rechunk=False)[2:]
    with kernels.using(False):
        want = json_keys.values(texts, "Input Dims")
    assert json_keys.values(texts, "Input Dims").to_list() == want.to_list()
    assert json_keys.values(texts[:0], "Input Dims").to_list() == []
