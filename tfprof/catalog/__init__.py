"""A catalog of runs: many profiles as one Parquet dataset per table, hive-partitioned by run,
host, worker and rank (a distributed job's run holds a partition per rank), with a ``runs`` table
listing them (``layout``); adding and removing runs and jobs safely (``write``);
one run as a ``Profile``, every run through SQL (``read``); several runs aggregated into one
profile that every view runs on (``aggregate``); the reference backend on Spark (``spark``), and
runs aggregated on Spark for views that stay there (``spark_members``, ``spark_views``);
what a catalog may name, since it is never trusted (``trust``), and a full check (``check``).
A catalog may also live in object storage (``s3://bucket/prefix``): ``storage`` reads and writes
its objects and holds the writers' lock, ``remote`` adds, removes and reads runs there.
"""

from tfprof.catalog.aggregate import AGGREGATES, aggregate_profile
from tfprof.catalog.check import check_catalog
from tfprof.catalog.layout import run_ranks
from tfprof.catalog.read import job_ranks, match_runs, member_profiles, run_profile, runs, sql
from tfprof.catalog.write import add_job, add_run, remove_run

__all__ = ["AGGREGATES", "add_job", "add_run", "aggregate_profile", "check_catalog", "job_ranks", "match_runs", "member_profiles", "remove_run", "run_profile",
           "run_ranks", "runs", "spark_aggregate", "sql"]


def __getattr__(name: str):
    if name == "spark_aggregate":  # imported on use: it imports the reference backend
        from tfprof.catalog.spark_members import spark_aggregate

        return spark_aggregate
    raise AttributeError(f"module 'tfprof.catalog' has no attribute {name!r}")
