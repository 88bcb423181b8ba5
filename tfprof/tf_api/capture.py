"""``ProfileContext``: profile a running TF1-style TensorFlow program in place
(docs/TFPROF_BEHAVIOUR.md, 'ProfileContext').

Inside ``with tfprof.ProfileContext(profile_dir) as pctx:`` every ``Session.run`` call is one
step. Chosen steps run with a full trace; their RunMetadata go to a ``tfprof.Profiler`` over
the session's graph (``pctx.profiler``), which is written as a ProfileProto file
``<profile_dir>/profile_<step>`` at the dump steps (readable by ``tfprof`` and by TensorFlow's
own tool) and can run views at chosen steps (``add_auto_profiling``).

The steps are chosen as TensorFlow 1.x's ``tf.contrib.tfprof.ProfileContext`` chose them:

- ``trace_steps=None`` traces automatically after ``WARMUP_STEPS`` (10): each new set of
  fetches once, then at random (seeded, so runs repeat) while the traced share of the graph is
  under one half, at most ``MAX_TRACED_STEPS`` (100) steps in all; a list traces those steps.
- ``dump_steps=None`` dumps at step 100.
- ``trace_next_step()`` / ``dump_next_step()`` act on the next run only.
- Only one run at a time takes part (a run on another thread meanwhile is left alone).

Differences, all on the side of keeping the caller's data: a run that raises restores the
caller's RunOptions; a RunMetadata the caller passes is filled on an untraced step of a
profiled run too (TensorFlow dropped it there); the profiler stays usable after the context
exits; an unknown ``add_auto_profiling`` command is refused when it is added, not at its step.

TensorFlow is imported when a context is created (``pip install 'tfprof[tensorflow]'``).
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tfprof.errors import OptionError, OutputError, TfprofError
from tfprof.output import write_file
from tfprof.tf_api.profiler import Profiler
from tfprof.tf_api.tf_graph import tensorflow

WARMUP_STEPS = 10
MAX_TRACED_STEPS = 100

# add_auto_profiling's commands and the Profiler method each runs.
AUTO_PROFILE_COMMANDS = {
    "graph": "profile_graph",
    "scope": "profile_name_scope",
    "op": "profile_operations",
    "code": "profile_python",
}

# The context whose Session.run patch is in place (one at a time, as in TensorFlow).
_ACTIVE: list[ProfileContext] = []


class ProfileContext:
    """Traces and profiles the ``Session.run`` calls made inside it (tf.contrib.tfprof.ProfileContext).

    Args:
      profile_dir: where ``profile_<step>`` (and, with ``debug``, ``run_meta_<step>``) files go.
      trace_steps: the steps to trace; None chooses them automatically.
      dump_steps: the steps after which the profile is written; None is ``[100]``.
      enabled: False makes everything a no-op (and needs no TensorFlow).
      debug: also write each traced RunMetadata as text and say on stderr what is done.
    """

    def __init__(
        self,
        profile_dir: str | os.PathLike,
        trace_steps: Iterable[int] | None = None,
        dump_steps: Iterable[int] | None = None,
        enabled: bool = True,
        debug: bool = False,
    ) -> None:
        self._enabled = enabled
        if not enabled:
            return
        self._tf = tensorflow("tfprof.ProfileContext")
        if not profile_dir:
            raise OptionError("ProfileContext needs a directory for the profiles (profile_dir is empty)")
        self._dir = Path(profile_dir)
        self._debug = debug
        if trace_steps is None:
            self._trace_steps: set[int] = set()
            self._auto_tracing = True
        else:
            trace_steps = list(trace_steps)
            if len(trace_steps) > MAX_TRACED_STEPS:
                raise OptionError(
                    f"ProfileContext traces at most {MAX_TRACED_STEPS} steps; trace_steps has {len(trace_steps)}"
                )
            self._trace_steps = set(trace_steps)
            self._auto_tracing = False
        self._dump_steps = {MAX_TRACED_STEPS} if dump_steps is None else set(dump_steps)
        self._rng = random.Random(111)  # TensorFlow's seed: the same runs trace the same steps
        self._fetched: set[str] = set()
        self._slow_path_steps = self._dump_steps | self._trace_steps
        self._trace_next_step = False
        self._dump_next_step = False
        self._step = 0
        self._traced_steps = 0
        self._auto_profiles: list[tuple[str, Mapping[str, Any], list[int]]] = []
        self._profiler: Profiler | None = None
        self._views: dict[str, dict[int, Any]] = {}
        self._lock = threading.Lock()
        self._session_class: Any = None
        self._original_run: Any = None

    # ------------------------------------------------------------------ public API

    @property
    def profiler(self) -> Profiler | None:
        """The ``tfprof.Profiler`` the traced steps go to (None when disabled); created on first
        use over the default graph, and switched to the graph of each session that is traced."""
        if not self._enabled:
            return None
        if self._profiler is None:
            self._profiler = Profiler(self._tf.compat.v1.get_default_graph())
        return self._profiler

    def add_auto_profiling(self, cmd: str, options: Mapping[str, Any], profile_steps: Iterable[int]) -> None:
        """Trace the steps ``profile_steps`` and run view ``cmd`` (scope, graph, op or code) with
        ``options`` after each; the results are kept (``get_profiles``) and printed as
        ``options['output']`` says."""
        if not self._enabled:
            return
        if cmd not in AUTO_PROFILE_COMMANDS:
            raise OptionError(f"Unknown cmd `{cmd}` for add_auto_profiling; valid: {', '.join(AUTO_PROFILE_COMMANDS)}")
        steps = list(profile_steps)
        self._auto_profiles.append((cmd, options, steps))
        self._slow_path_steps |= set(steps)
        self._trace_steps |= set(steps)

    def get_profiles(self, cmd: str) -> dict[int, Any]:
        """``{step: proto}`` of the auto-profiling runs of ``cmd`` so far."""
        if cmd not in self._views:
            raise OptionError(f"no auto-profiling of `{cmd}` has run (add_auto_profiling, then run its steps)")
        return self._views[cmd]

    def trace_next_step(self) -> None:
        """Trace the next ``Session.run`` and add it to the profiler."""
        if not self._enabled:
            return
        self._trace_next_step = True
        self._slow_path_steps.add(self._step)

    def dump_next_step(self) -> None:
        """Write ``profile_<step>`` after the next ``Session.run``."""
        if not self._enabled:
            return
        self._dump_next_step = True
        self._slow_path_steps.add(self._step)

    # ------------------------------------------------------------------ the context

    def __enter__(self) -> ProfileContext:
        if not self._enabled:
            return self
        if _ACTIVE:
            raise TfprofError("a ProfileContext is already active; profile one context at a time")
        from tensorflow.python.client import session as tf_session  # noqa: PLC0415 (TensorFlow only here)

        self._session_class = tf_session.BaseSession
        self._original_run = tf_session.BaseSession.run
        self._fetch_mapper = tf_session._FetchMapper  # how Session.run itself names fetches
        context = self

        def run(session, fetches, feed_dict=None, options=None, run_metadata=None):
            return context._run(session, fetches, feed_dict, options, run_metadata)

        run.__doc__ = self._original_run.__doc__
        self._session_class.run = run
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._enabled or self._original_run is None:
            return
        self._session_class.run = self._original_run
        self._original_run = None
        _ACTIVE.remove(self)

    # ------------------------------------------------------------------ one Session.run

    @contextlib.contextmanager
    def _new_step(self) -> Iterator[tuple[int, bool]]:
        acquired = self._lock.acquire(blocking=False)
        try:
            yield self._step, acquired
        finally:
            self._step += 1
            self._trace_next_step = False
            self._dump_next_step = False
            if acquired:
                self._lock.release()

    def _run(self, session: Any, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
        original = self._original_run
        with self._new_step() as (step, locked):
            if locked and not self._is_fast_path(step):
                if self._should_trace(step, session.graph, fetches):
                    result = self._traced_run(session, step, fetches, feed_dict, options, run_metadata)
                else:
                    result = original(session, fetches, feed_dict, options, run_metadata)
                self._maybe_dump(step)
                self._auto_profile(step)
                return result
        return original(session, fetches, feed_dict, options, run_metadata)

    def _traced_run(self, session, step, fetches, feed_dict, options, run_metadata) -> Any:
        v1 = self._tf.compat.v1
        if self._debug:
            sys.stderr.write(f"debug: tracing step: {step}\n")
        if run_metadata is None:
            run_metadata = v1.RunMetadata()
        if options is None:
            options = v1.RunOptions()
        old_level = options.trace_level
        options.trace_level = v1.RunOptions.FULL_TRACE
        try:
            result = self._original_run(session, fetches, feed_dict, options, run_metadata)
        finally:
            options.trace_level = old_level
        if self._debug:
            # replaced if it exists, as TensorFlow's debug dump does
            write_file(self._folder() / f"run_meta_{step}", str(run_metadata), force=True, what="profile_dir")
        profiler = self.profiler
        profiler._use_graph(session.graph)
        profiler.add_step(step, run_metadata)
        return result

    def _is_fast_path(self, step: int) -> bool:
        if step in self._slow_path_steps:
            return False
        # Automatic tracing looks at every step after the warm-up.
        return not (self._auto_tracing and step > WARMUP_STEPS and self._traced_steps <= MAX_TRACED_STEPS)

    def _should_trace(self, step: int, graph: Any, fetches: Any) -> bool:
        if self._traced_steps > MAX_TRACED_STEPS:
            return False
        if step in self._trace_steps or self._trace_next_step:
            self._traced_steps += 1
            return True
        if self._auto_tracing and step > WARMUP_STEPS:
            with graph.as_default():
                names = [f.name for f in self._fetch_mapper.for_fetch(fetches).unique_fetches()]
            key = "-".join(sorted(names))
            if self._debug:
                sys.stderr.write(f"debug: trace fetches: {key}\n")
            if key not in self._fetched:  # fetches never traced: trace them
                self._fetched.add(key)
                self._traced_steps += 1
                return True
            # Little of the graph traced yet: trace one step in about five (TensorFlow's odds,
            # evaluated in its order so that the seeded generator draws the same numbers).
            if self.profiler._coverage < 0.5 and step < MAX_TRACED_STEPS and self._rng.randint(0, 10) < 2:
                self._traced_steps += 1
                return True
        return False

    def _maybe_dump(self, step: int) -> None:
        if not (step in self._dump_steps or self._dump_next_step):
            return
        if self._debug:
            sys.stderr.write(f"debug: dumping file at step: {step}\n")
        self.profiler._write_profile(str(self._folder() / f"profile_{step}"))

    def _folder(self) -> Path:
        """The profile directory, created if needed (as TensorFlow does)."""
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"`{self._dir}` cannot be created for the profiles: {exc.strerror or exc}") from None
        return self._dir

    def _auto_profile(self, step: int) -> None:
        for cmd, options, steps in self._auto_profiles:
            if step not in steps:
                continue
            if self._debug:
                sys.stderr.write(f"debug: profiling {cmd} step: {step}\n")
            view = getattr(self.profiler, AUTO_PROFILE_COMMANDS[cmd])
            self._views.setdefault(cmd, {})[step] = view(options)
