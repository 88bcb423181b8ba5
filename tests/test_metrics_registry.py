"""The metrics' records (tfprof.schema.metrics) agree with every place that still states a metric
by hand: the node tables' columns, the select-field registry's cells, the Options fields, and the
tables derived from them (thresholds, orders, pprof and stack metrics, the public columns)."""

from __future__ import annotations

from dataclasses import fields

from tfprof.queries.options import ORDER_BY, Options
from tfprof.queries.pprof import PPROF_METRICS
from tfprof.queries.spec import MULTI_THRESHOLDS, SINGLE_THRESHOLDS, TREE_ORDER
from tfprof.queries.stacks import STACK_METRICS, unit_of
from tfprof.schema import METRICS as TABLE_METRICS
from tfprof.schema import PUBLIC_NAMES
from tfprof.schema.metrics import AGGREGATES, BY_SELECT, KINDS, METRIC_LIST, kind_of
from tfprof.views.fields import METRICS as FIELD_METRICS
from tfprof.views.table import COLUMNS


def test_each_record_is_the_metric_the_other_layers_know():
    assert {m.column for m in METRIC_LIST} == set(TABLE_METRICS)
    assert set(BY_SELECT) == set(FIELD_METRICS)
    options = {f.name for f in fields(Options)}
    for m in METRIC_LIST:
        field = FIELD_METRICS[m.select]
        assert (field.column, field.kind) == (m.column, m.kind)
        assert m.kind in KINDS and m.aggregate in AGGREGATES
        assert m.public_column == PUBLIC_NAMES.get(m.column, m.column)
        assert m.public_column in COLUMNS and "total_" + m.public_column in COLUMNS
        assert m.order_by in ORDER_BY and TREE_ORDER[m.order_by] == "total_" + m.column
        if m.threshold:
            assert m.threshold in options
            assert SINGLE_THRESHOLDS[m.threshold] == ("" if m.threshold_on_self else "total_") + m.column
            assert MULTI_THRESHOLDS[m.threshold] == "total_" + m.column
        assert kind_of(m.public_column) == kind_of("total_" + m.public_column) == m.kind
        assert (field.legend, field.rank, field.doc[0]) == (m.legend, m.rank, m.field_doc)  # the text's, from the record


def test_the_exports_are_tfprofs_pprof_metrics_times_first():
    assert list(PPROF_METRICS) == ["micros", "accelerator_micros", "cpu_micros", "bytes", "peak_bytes",
                                   "residual_bytes", "output_bytes", "params", "float_ops"]
    assert STACK_METRICS == PPROF_METRICS
    assert [unit_of(s) for s in ("micros", "bytes", "params", "nosuch")] == ["microseconds", "bytes", "count", "count"]
    assert kind_of("run_count") == kind_of("total_definition_count") == "number"
