"""What the Chrome-trace scanner notes per event (its slots) and the codes it answers with,
shared by the numba scanner (``kineto_scan``, ``kineto_events``) and the Python side
(``trace_columns``, ``trace_json``) without importing numba.

numba caches each compiled function by its own file's stamp, with the globals it read frozen in:
the key table ``kineto_scan.ARG_TABLE`` is built from ``ARG_KEYS``, so a change to the keys must
come with a change to ``kineto_scan.py`` (its cache then recompiles); ``SLOTS`` is passed to the
scan as an argument for the same reason."""

FIELDS = ("ph", "cat", "name", "pid", "tid", "id", "s", "bp")  # string columns, slots 0-7
ARGS = 8  # the slot of the args object
ARG_KEYS = ("device", "correlation", "Bytes", "Total Allocated", "Total Reserved", "name", "Device Type",
            "Device Id", "Sequence number")  # slots 9-17
SLOTS = len(FIELDS) + 1 + len(ARG_KEYS)
CODED = ("ph", "cat", "name", "pid", "tid")  # fields of few distinct values: dictionary columns (codes)
PYTHON, NON_ASCII, MINIFY = 1, 2, 4  # event flags: decode in Python, has non-ASCII text, args have whitespace
OK, IN_STRING, OPEN, CUT, BAD, NOT_OBJECT, TOO_DEEP = 0, -1, -2, -3, -4, -5, -6  # scan status
SPLIT = 1  # scan status: stopped where it was asked to, between two events
MAX_DEPTH = 1000  # JSON nesting the scanner follows
