"""A profile at a glance: model facts, per-step totals and table sizes, as text (``tfprof demo``)
and as HTML (a notebook shows ``tfprof.summarize(prof)`` as a card)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tfprof.profile import Profile


@dataclass(frozen=True, repr=False)
class Summary:
    """What ``summarize`` found: ``facts`` (model facts by name), ``per_step`` (one row per
    step: the root totals tfprof prints), ``row_counts`` (rows per table)."""

    where: str
    source: str
    facts: dict[str, int]
    per_step: pl.DataFrame
    row_counts: dict[str, int]

    def text(self) -> str:
        from tfprof.views.summary import render_counts, render_facts, render_frame

        return "\n".join([
            render_facts(self.facts),
            "\ntime and memory per step (sums over all nodes, as tfprof's root totals):",
            render_frame(self.per_step),
            "\ntables:",
            render_counts(self.row_counts),
        ])

    def __str__(self) -> str:
        """``print(tfprof.summarize(prof))``: the text ``tfprof demo`` prints."""
        return self.text()

    def __repr__(self) -> str:  # a console shows the summary, not the record's fields
        return f"tfprof summary ({self.source}, {self.where})\n{self.text()}"

    def _repr_html_(self) -> str:
        from tfprof.views.notebook import profile_html

        return profile_html(self.where, self.source, self.facts, self.per_step, self.row_counts)


def summarize(prof: Profile) -> Summary:
    """``prof`` at a glance (module docstring).

    >>> import tfprof
    >>> tfprof.summarize(tfprof.load(tfprof.sample_path())).row_counts["steps"]
    1
    """
    from tfprof.queries.summary import model_facts, summary

    where = f"store {prof.store}" if prof.store is not None else "in memory"
    return Summary(where, prof.source, model_facts(prof), summary(prof), prof.row_counts())


def table_sizes(prof: Profile) -> str:
    """The ``tfprof tables`` listing: each table with its row count."""
    from tfprof.views.summary import render_counts

    return render_counts(prof.row_counts())
