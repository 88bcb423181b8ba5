"""``ProfileOptionBuilder``: the option dicts of ``tf.profiler``, built as TensorFlow builds them.

The dicts hold the same keys and values as TensorFlow's ``option_builder.py`` (TF 2.21), so a
dict built here can be given to TensorFlow and the other way round. Every setter returns the
builder; ``build()`` returns a deep copy.

>>> opts = ProfileOptionBuilder().with_max_depth(4).select(["params"]).build()
>>> opts["max_depth"], opts["select"], opts["account_type_regexes"]
(4, ['params'], ['.*'])
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

TRAINABLE_VARIABLES = "_trainable_variables"
"""The op type ``write_op_log`` gives trainable variables (tfprof_logger.TRAINABLE_VARIABLES)."""


def _preset(**values: Any) -> dict[str, Any]:
    """The option dict every preset starts from (docs/TFPROF_BEHAVIOUR.md, 'Option presets'), with ``values`` set in
    place; the
    builder's defaults differ only in max_depth and account_displayed_op_only."""
    base = {
        "max_depth": 10000,
        "min_bytes": 0,
        "min_micros": 0,
        "min_params": 0,
        "min_float_ops": 0,
        "min_occurrence": 0,
        "order_by": "name",
        "account_type_regexes": [".*"],
        "start_name_regexes": [".*"],
        "trim_name_regexes": [],
        "show_name_regexes": [".*"],
        "hide_name_regexes": [],
        "account_displayed_op_only": True,
        "select": ["micros"],
        "step": -1,
        "output": "stdout",
    }
    base.update(values)
    return base


class ProfileOptionBuilder:
    """Builds the option dict of ``profile``/``Profiler.profile_*`` (tf.profiler.ProfileOptionBuilder).

    ``ProfileOptionBuilder()`` starts from tfprof's Python defaults (max_depth 100, everything
    accounted and shown, select micros); ``ProfileOptionBuilder(opts)`` from a copy of ``opts``.
    """

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        if options is not None:
            self._options = copy.deepcopy(options)
        else:
            self._options = _preset(max_depth=100, account_displayed_op_only=False)

    # ----------------------------------------------------------- presets (docs/TFPROF_BEHAVIOUR.md, 'Option presets')

    @staticmethod
    def trainable_variables_parameter() -> dict[str, Any]:
        """Parameters of the trainable variables (op type ``_trainable_variables``), for the scope view.

        >>> ProfileOptionBuilder.trainable_variables_parameter()["select"]
        ['params']
        """
        return _preset(account_type_regexes=[TRAINABLE_VARIABLES], select=["params"])

    @staticmethod
    def float_operation() -> dict[str, Any]:
        """Float operations of the nodes that have any, largest first.

        >>> ProfileOptionBuilder.float_operation()["order_by"]
        'float_ops'
        """
        return _preset(min_float_ops=1, order_by="float_ops", select=["float_ops"])

    @staticmethod
    def time_and_memory(
        min_micros: int = 1,
        min_bytes: int = 1,
        min_accelerator_micros: int = 0,
        min_cpu_micros: int = 0,
        min_peak_bytes: int = 0,
        min_residual_bytes: int = 0,
        min_output_bytes: int = 0,
    ) -> dict[str, Any]:
        """Execution time and memory of the nodes that take at least the given time and bytes.

        >>> ProfileOptionBuilder.time_and_memory(min_micros=10)["min_micros"]
        10
        """
        return {
            "max_depth": 10000,
            "min_bytes": min_bytes,
            "min_peak_bytes": min_peak_bytes,
            "min_residual_bytes": min_residual_bytes,
            "min_output_bytes": min_output_bytes,
            "min_micros": min_micros,
            "min_accelerator_micros": min_accelerator_micros,
            "min_cpu_micros": min_cpu_micros,
            **{k: v for k, v in _preset(order_by="micros", select=["micros", "bytes"]).items()
               if k not in ("max_depth", "min_bytes", "min_micros")},
        }

    # ------------------------------------------------------------------ setters

    def build(self) -> dict[str, Any]:
        """A deep copy of the options built so far."""
        return copy.deepcopy(self._options)

    def _set(self, **values: Any) -> ProfileOptionBuilder:
        self._options.update(values)
        return self

    def with_max_depth(self, max_depth: int) -> ProfileOptionBuilder:
        """Show nodes down to this depth (scope/graph/code: tree depth; op: rows)."""
        return self._set(max_depth=max_depth)

    def with_min_memory(
        self, min_bytes: int = 0, min_peak_bytes: int = 0, min_residual_bytes: int = 0, min_output_bytes: int = 0
    ) -> ProfileOptionBuilder:
        """Show only nodes with at least this many requested, peak, residual and output bytes."""
        return self._set(
            min_bytes=min_bytes,
            min_peak_bytes=min_peak_bytes,
            min_residual_bytes=min_residual_bytes,
            min_output_bytes=min_output_bytes,
        )

    def with_min_execution_time(
        self, min_micros: int = 0, min_accelerator_micros: int = 0, min_cpu_micros: int = 0
    ) -> ProfileOptionBuilder:
        """Show only nodes with at least this much total, accelerator and cpu time (µs)."""
        return self._set(
            min_micros=min_micros, min_accelerator_micros=min_accelerator_micros, min_cpu_micros=min_cpu_micros
        )

    def with_min_parameters(self, min_params: int) -> ProfileOptionBuilder:
        """Show only nodes with at least this many parameters."""
        return self._set(min_params=min_params)

    def with_min_occurrence(self, min_occurrence: int) -> ProfileOptionBuilder:
        """Show only nodes that stand for at least this many graph nodes (or runs)."""
        return self._set(min_occurrence=min_occurrence)

    def with_min_float_operations(self, min_float_ops: int) -> ProfileOptionBuilder:
        """Show only nodes with at least this many float operations."""
        return self._set(min_float_ops=min_float_ops)

    def with_accounted_types(self, account_type_regexes: Sequence[str]) -> ProfileOptionBuilder:
        """Count only nodes that have an op type (op, device, op-log type) matching one of these."""
        return self._set(account_type_regexes=copy.copy(account_type_regexes))

    def with_node_names(
        self,
        start_name_regexes: Sequence[str] | None = None,
        show_name_regexes: Sequence[str] | None = None,
        hide_name_regexes: Sequence[str] | None = None,
        trim_name_regexes: Sequence[str] | None = None,
    ) -> ProfileOptionBuilder:
        """Name regexes: where display starts, what is shown or hidden, where descent stops.
        Lists left as None keep their value."""
        names = {
            "start_name_regexes": start_name_regexes,
            "show_name_regexes": show_name_regexes,
            "hide_name_regexes": hide_name_regexes,
            "trim_name_regexes": trim_name_regexes,
        }
        return self._set(**{key: copy.copy(value) for key, value in names.items() if value is not None})

    def account_displayed_op_only(self, is_true: bool) -> ProfileOptionBuilder:
        """Whether totals count only the nodes that are displayed."""
        return self._set(account_displayed_op_only=is_true)

    def with_empty_output(self) -> ProfileOptionBuilder:
        """Print nothing; only return the result."""
        return self._set(output="none")

    def with_stdout_output(self) -> ProfileOptionBuilder:
        """Print the report to stdout."""
        return self._set(output="stdout")

    def with_file_output(self, outfile: str) -> ProfileOptionBuilder:
        """Write the report to ``outfile``."""
        return self._set(output=f"file:outfile={outfile}")

    def with_timeline_output(self, timeline_file: str) -> ProfileOptionBuilder:
        """Write a Chrome trace (timeline) to ``timeline_file``."""
        return self._set(output=f"timeline:outfile={timeline_file}")

    def with_pprof_output(self, pprof_file: str) -> ProfileOptionBuilder:
        """Write a gzipped pprof profile to ``pprof_file`` (code view)."""
        return self._set(output=f"pprof:outfile={pprof_file}")

    def order_by(self, attribute: str) -> ProfileOptionBuilder:
        """Order siblings (or op-view rows) by ``attribute`` (name, micros, bytes, params, ...)."""
        return self._set(order_by=attribute)

    def select(self, attributes: Sequence[str]) -> ProfileOptionBuilder:
        """The attributes to show (micros, bytes, params, float_ops, occurrence, device, ...)."""
        return self._set(select=copy.copy(attributes))

    def with_step(self, step: int) -> ProfileOptionBuilder:
        """Use the statistics of step ``step`` (-1: the average over the steps)."""
        return self._set(step=step)
