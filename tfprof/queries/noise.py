"""The noise band of a diff: is a change between two profiles larger than their step-to-step variation?

Each profile with several steps gives, per row of a view, one value per step: a sample. The
statistic is **Welch's t-test** on the two samples (unequal variances, unequal sizes):

* ``d = mean_b - mean_a`` (the means of the per-step values; a step in which a row has no value
  counts as 0, so every step of a profile is in its sample);
* ``se = sqrt(var_a / n_a + var_b / n_b)`` with the samples' unbiased variances;
* degrees of freedom by Welch–Satterthwaite,
  ``df = se⁴ / ((var_a/n_a)² / (n_a-1) + (var_b/n_b)² / (n_b-1))``;
* the **noise band** is ``± t(1 - ALPHA/2, df) × se``, and a change is **significant** when
  ``|d|`` lies outside it (two-sided test at ``ALPHA`` = 0.001).

The level is strict on purpose: a diff tests every row of a view at once (hundreds to hundreds
of thousands), so at 0.05 one unchanged row in twenty would be flagged. Two samples with no
variance at all (parameters, usually bytes) have a band of zero width: any change is
significant, no change is not. Student's t quantiles come from ``T_999`` (a table by degrees of
freedom, interpolated linearly in 1/df, exact at the tabulated points), so no statistics library
is needed; ``tests/test_diff_noise.py`` checks the table by integrating the t density.
"""

from __future__ import annotations

import numpy as np
import polars as pl

ALPHA = 0.001  # two-sided
# Student's t, the 1 - ALPHA/2 = 0.9995 quantile, by degrees of freedom; beyond 120 the normal's.
T_999 = {
    1: 636.619, 2: 31.599, 3: 12.924, 4: 8.610, 5: 6.869, 6: 5.959, 7: 5.408, 8: 5.041, 9: 4.781,
    10: 4.587, 11: 4.437, 12: 4.318, 13: 4.221, 14: 4.140, 15: 4.073, 16: 4.015, 17: 3.965,
    18: 3.922, 19: 3.883, 20: 3.850, 21: 3.819, 22: 3.792, 23: 3.768, 24: 3.745, 25: 3.725,
    26: 3.707, 27: 3.690, 28: 3.674, 29: 3.659, 30: 3.646, 40: 3.551, 60: 3.460, 120: 3.373,
}
T_999_NORMAL = 3.291  # df -> infinity


def t_critical(df: np.ndarray) -> np.ndarray:
    """``t(0.9995, df)`` for each degrees of freedom (>= 1; fractional allowed), interpolated in
    1/df between the table's points."""
    known = np.array(sorted(T_999), dtype=np.float64)
    inv = np.concatenate([[0.0], 1.0 / known[::-1]])  # increasing: infinity, 120, ..., 1
    values = np.concatenate([[T_999_NORMAL], np.array([T_999[int(k)] for k in known[::-1]])])
    df = np.maximum(np.asarray(df, dtype=np.float64), 1.0)
    return np.interp(1.0 / df, inv, values)


def sample_columns(prefix: str, column: str) -> list[pl.Expr]:
    """Per-row sums a sample needs, over frames holding one row per (row key, step):
    ``<prefix>sum``, ``<prefix>sumsq`` of ``column`` (as Float64)."""
    v = pl.col(column).cast(pl.Float64)
    return [v.sum().alias(f"{prefix}sum"), (v * v).sum().alias(f"{prefix}sumsq")]


def band(frame: pl.DataFrame, a: str, b: str, n_a: int, n_b: int, out: str) -> pl.DataFrame:
    """Add ``<out>_noise`` (the band's half width) and ``<out>_significant`` to ``frame`` from
    the sums ``<a>sum``/``<a>sumsq`` and ``<b>...`` of samples of sizes ``n_a``, ``n_b`` (both >= 2);
    a missing sum is a sample of zeros. The sums are dropped."""
    cols = [f"{a}sum", f"{a}sumsq", f"{b}sum", f"{b}sumsq"]
    sa, qa, sb, qb = (frame[c].fill_null(0.0).to_numpy().astype(np.float64) for c in cols)
    mean_a, mean_b = sa / n_a, sb / n_b
    # unbiased variances; clipped at 0 against rounding in sumsq - sum²/n
    var_a = np.maximum((qa - sa * mean_a) / (n_a - 1), 0.0)
    var_b = np.maximum((qb - sb * mean_b) / (n_b - 1), 0.0)
    ea, eb = var_a / n_a, var_b / n_b
    se2 = ea + eb
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(se2 > 0, se2 * se2 / (ea * ea / (n_a - 1) + eb * eb / (n_b - 1)), np.inf)
    width = t_critical(np.where(np.isfinite(df), df, 1e12)) * np.sqrt(se2)
    # relative slack against float rounding: equal samples give |d| = 0 exactly, not 1e-12
    d = np.abs(mean_b - mean_a)
    significant = d > width + 1e-9 * np.maximum(np.abs(mean_a), np.abs(mean_b))
    return frame.drop(cols).with_columns(
        pl.Series(f"{out}_noise", width), pl.Series(f"{out}_significant", significant)
    )
