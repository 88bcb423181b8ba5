"""How far a foreign read has got, told to an ingest progress callback (``tfprof.ingest.Progress``:
done, total, what) as thousandths of the whole read.

A reader tells fractions of its own work (``Tell``: fraction, what); ``part`` hands a step of it
(build, say) a teller of its own that maps 0–1 onto that step's share. The shares are rough
(measured on large captures: reading the events is about 40 % of a Kineto read, building the
tables about half of any read); they move a bar, nothing is computed from them.
"""

from __future__ import annotations

from collections.abc import Callable

Tell = Callable[[float, str], None]

STEPS = 1000  # the callback's total


def teller(progress: Callable[[int, int, str], None] | None) -> Tell:
    """A ``Tell`` that calls ``progress`` (None: one that does nothing). The read's end (1.0) is
    told once, by the reader, last."""
    if progress is None:
        return silent

    def tell(fraction: float, what: str) -> None:
        progress(min(STEPS, max(0, round(fraction * STEPS))), STEPS, what)

    return tell


def silent(fraction: float, what: str) -> None:
    """A ``Tell`` that tells no one."""


def part(tell: Tell, lo: float, hi: float) -> Tell:
    """A ``Tell`` for a step that is ``lo`` to ``hi`` of the whole."""
    if tell is silent:
        return silent
    return lambda fraction, what: tell(lo + (hi - lo) * fraction, what)
