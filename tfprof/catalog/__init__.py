"""A catalog of runs: many profiles as one Parquet dataset per table, hive-partitioned by run,
host, worker and rank (a distributed job's run holds a partition per rank), with a ``runs`` table
listing them (``layout``); adding and removing runs and jobs safely (``write``);
one run as a ``Profile``, every run through SQL (``read``); several runs aggregated into one
profile that every view runs on (``aggregate``); the reference backend on Spark (``spark``), and
runs aggregated on Spark for views that stay there (``spark_members``, ``spark_views``);
what a catalog may name, since it is never trusted (``trust``), and a full check (``check``).
A catalog may also live in object storage (``s3://bucket/prefix``): ``storage`` reads and writes
its objects (its clients: ``storage_clients``; time limits and interruptible calls:
``storage_calls``; the writers' lock: ``storage_lock``), ``remote`` adds and removes runs there
and ``remote_read`` reads them.
"""

from __future__ import annotations

from tfprof.lazy import lazy_names

# Each public name loads with its module on first use: ``tfprof.catalog.uri`` is read by the
# command line before it knows whether a command needs polars (tfprof/cli/__init__.py).
_HOMES = {
    "AGGREGATES": "aggregate", "aggregate_profile": "aggregate", "check_catalog": "check", "run_ranks": "layout",
    "job_ranks": "read", "match_runs": "read", "member_profiles": "read", "run_profile": "read", "runs": "read",
    "sql": "read", "add_job": "write", "add_run": "write", "remove_run": "write", "spark_aggregate": "spark_members",
}

__all__ = sorted(_HOMES)

__getattr__ = lazy_names(__name__, _HOMES)
