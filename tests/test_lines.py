"""The byte-level line writer (views/lines.py, views/line_writer.py) prints exactly what the polars lines printed.

``reference_tree_lines`` is ``columns.tree_lines`` as it was before the writer, kept verbatim;
random frames (random selects, unicode names, nulls, not-accounted rows, ties and huge values)
must give the same lines, the same report text and the same lines under tensor values.
"""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from tfprof.views import line_writer
from tfprof.views import lines as lines_mod
from tfprof.views.columns import (
    tree_lines,
    tree_lines_polars,
    tree_text,
)
from tfprof.views.fields import FIELDS, METRICS
from tfprof.views.text import multi_legend, render_code, render_tree, tree_legend

# The reference: ``tree_lines`` as it was before the byte writer (polars string expressions),
# kept in the package as the writer's fallback.
reference_tree_lines = tree_lines_polars


def reference_text(frame, select, *, code=False, after=None, prefix=""):
    """The report body as ``render_tree``/``render_code`` built it before the writer."""
    lines = reference_tree_lines(frame, select, code=code)
    if after is not None:
        lines = pl.select(
            pl.when(after.str.len_chars() > 0).then(lines + "\n" + after.str.strip_suffix("\n")).otherwise(lines)
        ).to_series()
    return prefix + ((lines + "\n").str.join("").item() if len(lines) else "")


# ----------------------------------------------------------------------------- random frames

METRIC_COLUMNS = [f.column for f in METRICS.values()] + ["run_count"]
SELECTABLE = list(FIELDS)
NAMES = ["a", "", "scope/op_1", "Ω", "名前/層_3", "model.py:12:build", "x" * 12, "é" * 6, "🙂/" * 5,
         "very/long/scope/name/with/many/parts/" * 3, "tab\tand spaces ", "ünïcödé/ɐ/ɓ"]
EDGES = [0, 1, 5, 999, 1000, 1005, 1015, 1125, 1023, 1024, 999_994, 999_995, 999_999, 1_000_000, 1_005_000,
         123_456_789, 999_999_999, 1_000_000_000, 17_630_000_000, -1, -5, -1234, 2**40 - 5, 2**40 + 5,
         2**41 + 5, 2**50 + 12345, 2**62, -(2**62)]


def _value(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.3:
        return rng.choice(EDGES)
    if r < 0.5:
        return rng.randrange(0, 1100)  # the direct-index range, and a little past it
    if r < 0.7:
        return rng.randrange(1, 20000) * 5  # many x.xx5 ties
    return int(10 ** rng.uniform(0, 16))


def _name(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(NAMES)
    return "".join(rng.choice("abc/_:.Ωé名🙂 ") for _ in range(rng.randrange(0, 40)))


def random_frame(rng: random.Random, n: int) -> pl.DataFrame:
    """A frame with every column a scope, graph or code view frame may have."""
    pool = [_value(rng) for _ in range(rng.choice([3, 40, 2000]))]  # few or many distinct values
    cols: dict[str, pl.Series] = {}
    for m in METRIC_COLUMNS:
        own = [rng.choice(pool) if rng.random() < 0.9 else None for _ in range(n)]
        cols[m] = pl.Series(m, own, pl.Int64)
        cols["total_" + m] = pl.Series("total_" + m, [rng.choice(pool) for _ in range(n)], pl.Int64)
    cols["total_definition_count"] = pl.Series([rng.randrange(0, 3000) for _ in range(n)], dtype=pl.Int64)
    dims = lambda: [rng.choice([1, 3, 64, 1000, -1, None]) for _ in range(rng.randrange(0, 4))]  # noqa: E731
    op_types = lambda: [rng.choice(["MatMul", "Conv2D", None, "ü"]) for _ in range(rng.randrange(0, 3))]  # noqa: E731
    devices = ["/gpu:0", "/job:w/replica:0/task:0/device:CPU:0", "", "gpü:1"]
    return pl.DataFrame(
        {
            "name": [_name(rng) for _ in range(n)],
            "level": [rng.choice([0, 0, 1, 2, 7, 8, 20]) for _ in range(n)],
            "accounted": [rng.choice([True, True, False, None]) for _ in range(n)],
            **cols,
            "shape": [None if rng.random() < 0.1 else dims() for _ in range(n)],
            "device": [rng.choice(devices + [None]) for _ in range(n)],
            "devices": [None if rng.random() < 0.1 else rng.sample(devices, rng.randrange(0, 3)) for _ in range(n)],
            "op_types": [None if rng.random() < 0.1 else op_types() for _ in range(n)],
            "input_shapes": [
                None if rng.random() < 0.2 else [{"input_idx": k, "dims": dims()} for k in range(rng.randrange(0, 3))]
                for _ in range(n)
            ],
        },
        schema_overrides={
            "name": pl.String, "accounted": pl.Boolean, "device": pl.String, "shape": pl.List(pl.Int64),
            "devices": pl.List(pl.String), "op_types": pl.List(pl.String),
            "input_shapes": pl.List(pl.Struct({"input_idx": pl.Int64, "dims": pl.List(pl.Int64)})),
        },
    )  # fmt: skip


def random_select(rng: random.Random) -> list[str]:
    return rng.sample(SELECTABLE, rng.randrange(0, len(SELECTABLE) + 1))


def _first_difference(got: str, want: str) -> str:
    i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return f"first difference at {i}: got {got[max(0, i - 60):i + 60]!r}, want {want[max(0, i - 60):i + 60]!r}"


def assert_same(frame, select, *, code, after=None):
    want_lines = reference_tree_lines(frame, select, code=code)
    got_lines = tree_lines(frame, select, code=code)
    assert got_lines.dtype == pl.String and got_lines.len() == want_lines.len()
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got_lines, want_lines)) if g != w]
    assert not bad, f"select={select} code={code}: {len(bad)} lines differ, e.g. {bad[:3]}"
    got = tree_text(frame, select, code=code, after=after, prefix="legend\n")
    want = reference_text(frame, select, code=code, after=after, prefix="legend\n")
    assert got == want, f"select={select} code={code}: " + _first_difference(got, want)


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("seed", range(40))
def test_random_frames_match_the_polars_lines(seed):
    rng = random.Random(seed)
    frame = random_frame(rng, rng.choice([1, 7, 300, 1000]))
    for _ in range(4):
        assert_same(frame, random_select(rng), code=rng.random() < 0.5)
    assert_same(frame, SELECTABLE, code=False)  # every item at once
    assert_same(frame, SELECTABLE, code=True)


@pytest.mark.parametrize("seed", range(6))
def test_tensor_texts_under_lines(seed):
    rng = random.Random(100 + seed)
    frame = random_frame(rng, 500)
    texts = ["", "", None, "[1 2]\n", "a\nb", "\n", "Ω\n\n"]
    after = pl.Series("tensor_text", [rng.choice(texts) for _ in range(500)], pl.String)
    select = random_select(rng)
    want = reference_text(frame, select, after=after, prefix="L\n")
    assert tree_text(frame, select, after=after, prefix="L\n") == want
    assert render_tree(frame, select, after) == reference_text(frame, select, after=after, prefix=tree_legend(select))


def test_many_distinct_values_and_blocks():
    """Hash table growth (tens of thousands of distinct large values) and many row blocks."""
    rng = random.Random(5)
    n = 20_000
    frame = random_frame(rng, 50)
    frame = pl.concat([frame] * (n // 50)).with_columns(
        pl.Series("total_exec_micros", [int(10 ** rng.uniform(3, 18)) for _ in range(n)]),
        pl.Series("requested_bytes", [rng.randrange(-(2**63), 2**63) for _ in range(n)], pl.Int64),
        pl.Series("total_requested_bytes", [rng.randrange(0, 10**7) * 5 for _ in range(n)]),
    )
    for select, code in ((["micros", "bytes"], True), (["bytes", "micros", "params", "occurrence"], False)):
        assert_same(frame, select, code=code)
        assert render_code(frame, select) == reference_text(frame, select, code=True, prefix=multi_legend(select))


def test_names_from_shared_buffers():
    """Names that are a slice or a gather of a larger column: read from the string views in
    place, or copied where the shared buffers hold much more than the names."""
    rng = random.Random(9)
    big = pl.Series("name", ["n" * 30 + str(i) + "Ω" for i in range(200_000)])
    frame = random_frame(rng, 1000)
    for names in (big.slice(1000, 1000), big.gather(np.arange(0, 200_000, 200)), big.head(1000).str.slice(0, 10)):
        assert_same(frame.with_columns(names), ["micros", "device"], code=False)
    chunked = pl.concat([frame.head(300), frame.tail(700)], rechunk=False)
    assert chunked.n_chunks() > 1
    assert_same(chunked, ["micros", "params", "occurrence"], code=False)


def test_enum_names_write_like_strings():
    """A lean code report names its rows by an Enum of the trace labels (4 bytes a row); the
    text equals the one written from the same names as strings."""
    rng = random.Random(11)
    frame = random_frame(rng, 2000)
    labels = sorted(set(frame["name"].to_list())) + ["a label longer than twelve bytes Ω", "_TFProfRoot"]
    enum = frame["name"].cast(pl.Enum(labels))
    for select in (["micros"], ["bytes", "params", "float_ops"]):
        want = tree_text(frame, select, code=True)
        got = tree_text(frame.with_columns(enum), select, code=True)
        assert got == want
    longer = frame.with_columns(pl.Series("name", ["a label longer than twelve bytes Ω"] * frame.height))
    assert tree_text(longer.with_columns(longer["name"].cast(pl.Enum(labels))), ["micros"], code=True) == tree_text(
        longer, ["micros"], code=True
    )


def test_frames_the_writer_does_not_take():
    """Negative levels, null names, missing columns, non-boolean accounted, empty frames:
    the polars path prints (or raises) exactly as before."""
    rng = random.Random(3)
    frame = random_frame(rng, 50)
    select = ["micros", "params"]
    cases = [
        frame.with_columns(pl.Series("level", [-1] + [1] * 49)),
        frame.with_columns(pl.Series("name", [None] + ["a"] * 49, pl.String)),
        frame.with_columns(pl.Series("level", [None] + [1] * 49, pl.Int64)),
        frame.head(0),
        frame.with_columns(pl.col("level").cast(pl.UInt32)),  # the writer takes this one
    ]
    for case in cases:
        assert_same(case, select, code=False)
        assert_same(case, select, code=True)
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        tree_lines(frame.drop("total_run_count"), ["occurrence"])
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        reference_tree_lines(frame.drop("total_run_count"), ["occurrence"])


def test_a_known_line():
    """The reference itself prints what tfprof prints (a guard against comparing two wrongs)."""
    frame = pl.DataFrame(
        {"name": ["root", "a/Ω"], "level": [0, 1], "accounted": [True, False], "parameters": [0, 1_005],
         "total_parameters": [1_500, 1_005], "exec_micros": [None, 999], "total_exec_micros": [1_234_567, 1_000],
         "accelerator_exec_micros": [0, 0], "total_accelerator_exec_micros": [0, 0], "cpu_exec_micros": [0, 999],
         "total_cpu_exec_micros": [0, 1_000], "shape": [[], [3, 4]], "device": [None, "/gpu:0"]}
    )  # fmt: skip
    want = [
        "root (0/1.50k params, 0us/1.23sec, 0us/0us, 0us/0us)",
        "  a/Ω (3x4, --/1.00k params, --/1.00ms, --/0us, --/1.00ms, /gpu:0)",
    ]
    assert reference_tree_lines(frame, ["params", "micros", "device"]).to_list() == want
    assert tree_lines(frame, ["params", "micros", "device"]).to_list() == want
    assert tree_text(frame, ["params", "micros", "device"], prefix="P\n") == "P\n" + "\n".join(want) + "\n"


def test_polars_path_is_the_reference():
    rng = random.Random(11)
    frame = random_frame(rng, 300)
    for _ in range(5):
        select, code = random_select(rng), rng.random() < 0.5
        assert tree_lines_polars(frame, select, code=code).equals(reference_tree_lines(frame, select, code=code))


def test_literal_folding():
    """Literals join their neighbouring numbers; a separator that is always there joins the
    next item; one after a nullable item stays conditional."""
    assert lines_mod._fold([("own", "c", "time"), ("lit", "/"), ("val", "t", "time"), ("lit", "")]) == [
        ["own", "c", "time", "", ""], ["val", "t", "time", "/", ""]]
    assert lines_mod._fold([("lit", ", "), ("lit", "x")]) == [["lit", ", x"]]
    prog = lines_mod.Program()
    prog.item(nullable=pl.col("device"))
    prog.item(("own", "c", "time"), ("lit", "/"), ("val", "t", "time"))
    prog.item(("lit", "occurrence N/A in code view"))
    comp = lines_mod._Compiled(prog)
    assert comp.item_sep.tolist() == [False, True, False]
    assert ", occurrence N/A in code view" in comp.lits


def test_copies_stay_inside_their_arrays():
    """The writer's 16-byte copies may pass a string's end by up to 15 bytes but never an
    array's: a copy without that room raises instead of writing (or reading) past the end."""
    src = np.arange(1, 41, dtype=np.uint8)
    out = np.zeros(48, np.uint8)
    assert line_writer._copy(out, 3, src, 5, 19) == 22
    assert out[3:22].tolist() == src[5:24].tolist() and out[:3].tolist() == [0, 0, 0]
    assert not out[22 + 16 :].any()  # nothing written past the string's 16-byte tail
    for args in ((out, 30, src, 0, 5), (out, 0, src, 20, 5), (out, -1, src, 0, 1), (out, 0, src, -1, 1)):
        with pytest.raises(IndexError):
            line_writer._copy(*args)
    with pytest.raises(IndexError):
        line_writer._put(out, 48, 10)
