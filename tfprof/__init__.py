"""tfprof: TensorFlow's profiler re-implemented over Arrow tables, polars and DuckDB.

>>> import tfprof
>>> prof = tfprof.load(tfprof.sample_path())
>>> prof.row_counts()["nodes"] > 0
True
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tfprof.errors import (
    InputError,
    InputNotFoundError,
    OptionError,
    OutputError,
    ProfileFormatError,
    TfprofError,
)
from tfprof.profile import Profile

__version__ = "0.1.0"

__all__ = [
    "InputError",
    "InputNotFoundError",
    "OptionError",
    "OutputError",
    "Profile",
    "ProfileFormatError",
    "TfprofError",
    "load",
    "sample_path",
]


def load(
    profile_path: str | Path | None = None,
    *,
    graph_path: str | Path | None = None,
    run_meta_path: str | Path | list | None = None,
    op_log_path: str | Path | None = None,
    checkpoint_path: str | Path | None = None,
) -> Profile:
    """Load a profile: a ProfileProto file, a store directory, or raw tfprof inputs.

    >>> tfprof.load(tfprof.sample_path()).row_counts()["steps"]
    1
    """
    return Profile.from_inputs(
        profile_path=profile_path,
        graph_path=graph_path,
        run_meta_path=run_meta_path,
        op_log_path=op_log_path,
        checkpoint_path=checkpoint_path,
    )


def sample_path() -> Path:
    """Path of the sample ProfileProto bundled with the package (a small CNN training step)."""
    return Path(str(resources.files("tfprof") / "sample" / "cnn_profile.pb"))
