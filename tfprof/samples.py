"""The sample profiles bundled with the package, by name (``tfprof demo``, doctests, notebooks)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tfprof.errors import OptionError

# Sample ProfileProtos bundled with the package: copies of test fixtures' profile.pb
# (tests/fixtures/README.md says how they were made).
SAMPLES = {
    "cnn": "cnn_profile.pb",  # a ResNet-like CNN, one training step
    "multistep": "multistep_profile.pb",  # an MLP, three training steps (step 1 also computes accuracy)
}


def sample_path(name: str = "cnn") -> Path:
    """Path of a sample ProfileProto bundled with the package: ``cnn`` or ``multistep``.

    >>> import tfprof
    >>> tfprof.load(tfprof.sample_path("multistep")).row_counts()["steps"]
    3
    """
    if name not in SAMPLES:
        raise OptionError(f"Unknown sample `{name}`; valid: {', '.join(SAMPLES)}")
    return Path(str(resources.files("tfprof") / "sample" / SAMPLES[name]))
