"""JobChecker (docs/TFPROF_BEHAVIOUR.md, 'Advisor driver'): Google-internal in tfprof.

Open-source tfprof runs it through a stub runner that returns an empty AdviceProto, so the
checker never adds an entry (not even an empty one) to the advice. Reproduced: no evidence.
"""

from __future__ import annotations

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence


def job(prof: Profile, options: CheckOptions) -> Evidence | None:
    """Always None: the checker has no open-source implementation."""
    return None
