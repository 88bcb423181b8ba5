"""The atheris fuzz target of one reader: ``python fuzz/harness.py READER [libFuzzer flags] [CORPUS ...]``.

Every input goes through ``contract.check(READER, data)``: an exception it lets through is a
crash, which libFuzzer reports and saves (``-artifact_prefix``). ``fuzz/run.py`` runs this with
bounded time, memory and per-input timeout.

Coverage comes from tfprof's Python modules (and protobuf's text parser), instrumented as they
are imported. Modules that define numba kernels are left alone: numba compiles a function from
its bytecode, which instrumentation rewrites; inside the kernels libFuzzer is blind.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import atheris

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# numba decorators, njit(...) calls, and functions handed to tfprof.kernels.compiled
_KERNELS = re.compile(r"^\s*@(numba\.)?(njit|jit|vectorize|guvectorize|cfunc)\b|=\s*(numba\.)?njit\(|\bcompiled\(\w+\)\(",
                      re.M)


def compiled_modules() -> list[str]:
    """The tfprof modules that define numba kernels (not instrumented)."""
    package = HERE.parent / "tfprof"
    out = []
    for path in package.rglob("*.py"):
        if _KERNELS.search(path.read_text(encoding="utf-8")):
            parts = path.relative_to(package.parent).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(out)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: harness.py READER [libFuzzer flags] [CORPUS ...]")
    reader = sys.argv.pop(1)
    with atheris.instrument_imports(include=["tfprof", "google.protobuf.text_format"], exclude=compiled_modules()):
        from google.protobuf import text_format  # noqa: F401

        import tfprof  # noqa: F401
        import tfprof.api  # noqa: F401
        import tfprof.catalog.remote  # noqa: F401
        import tfprof.catalog.storage  # noqa: F401
        import tfprof.ingest.checkpoint  # noqa: F401
        import tfprof.ingest.foreign.kineto  # noqa: F401
        import tfprof.ingest.foreign.xspace  # noqa: F401
        import tfprof.ingest.locate  # noqa: F401
        import tfprof.ingest.profile_proto  # noqa: F401
        import tfprof.ingest.raw  # noqa: F401
        import tfprof.store  # noqa: F401
    import contract

    if reader not in contract.READERS:
        sys.exit(f"unknown reader {reader!r}; readers: {', '.join(contract.READERS)}")
    # Load every compiled kernel before the clock of the first input starts (-timeout).
    seed = _warm_up_input(contract, reader)
    contract.check(reader, seed)

    def one_input(data: bytes) -> None:
        contract.check(reader, data)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


def _warm_up_input(contract, reader: str) -> bytes:
    from make_corpus import seeds

    return min(seeds(reader).values(), key=len)


if __name__ == "__main__":
    main()
