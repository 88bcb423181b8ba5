"""The command line: one-shot tfprof commands and the interactive ``tfprof>`` shell, over ``tfprof.api``.

Cold start. ``tfprof --help``, ``tfprof CMD --help`` and an error for a missing input file
answer without importing polars, pyarrow, numba, duckdb, numpy or protobuf (0.2-0.3 s in all
instead of 1-3 s; docs/PERFORMANCE.md, "Cold start"). ``tests/test_cold_start.py`` fails if
one of them comes back on those paths. What keeps them light, in one place:

- the command modules (``tfprof.cli.*``) import the api, catalog and ui inside the commands'
  bodies, after the checks a mistyped path or option needs (``app.require_inputs``);
- what the help shows is read from light modules: the metric registry (``tfprof.schema.metrics``),
  the options and views (``tfprof.queries.options``, ``tfprof.queries.spec``: polars is imported
  where a regex is checked or a view matched), object-store URIs (``tfprof.catalog.uri``) and
  malloc's tuning (``tfprof.malloc``);
- ``tfprof.schema`` and ``tfprof.catalog`` load their public names with the submodule that
  holds them, on first use.
"""
