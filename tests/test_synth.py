"""The synthetic profile generator (benchmarks/synthlib.py) keeps its output, byte for byte.

Measured numbers (docs/PERFORMANCE.md) refer to its profiles, so a given seed and size must
always give the same file. The digests below were taken from the first generator, which held
every node as a Python object, before it was made to stream (to fit 7M-node profiles in memory); the streaming one must
reproduce them, also across tower boundaries (towers 2.. come from templates), through a
buffer that holds only a few nodes, and with numpy's shuffles redone by its own PCG64.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    # always the module names `synthlib` and `synthkernels`, as benchmarks/synth.py imports them:
    # numba's cache of the kernels is keyed by module and must be loadable by both
    sys.path.insert(0, str(ROOT / "benchmarks"))
    return importlib.import_module(name)


synth = _load("synthlib")
kernels = _load("synthkernels")

PINNED = {  # name: (write_profile keywords, sha256 of the profile)
    "default_2000x3": (dict(nodes=2000, steps=3), "3b3e23a4340e2cd0f26549c1f3c1c55ad6a7c948b8b05c4f27a26ca7a8aa8d9f"),
    "seed5_2000x3": (dict(nodes=2000, steps=3, seed=5),
                     "4154984658bd1fbbc7155bb52988cebeea36f150dd526d2e43873e2bf36212c8"),
    "one_step": (dict(nodes=300, steps=1), "3a5c00c2591228486874ee10a3cd8ce4c23a555b1dd31a5fa72b437363a7777b"),
    "no_trace": (dict(nodes=300, steps=2, trace=False),
                 "8fdc61c9fd8b757b3709e4e3099f6449b7ffa78e7df5582d273975112f9bdfbb"),
    "cpu_only": (dict(nodes=300, steps=2, gpu=False, loops=False),
                 "9f02ecf51c722b881bbfe5fec8e6f4daa7e47a6669c7131039f2484608a91aa8"),
    "key_order": (dict(nodes=300, steps=2, key_order=True),
                  "199be02d53c7835065b979d923021fc208bbe9b9c4ea9c2e143e691fba5ce463"),
    "empty_steps": (dict(nodes=300, steps=2, empty_steps=3),
                    "9357bb6c003f5cf95ae3a7a03b3c5d38b71a16296a478e015772dfd0d7ffe097"),
    "all_run": (dict(nodes=300, steps=2, all_run=True),
                "4b1a15ad054a2099136da584fedb6755ddc5a4fac90722ee1256675b412f9a5e"),
    "deep_scopes": (dict(nodes=300, steps=2, scope_depth=9, seed=7),
                    "c9f812474d270ae40f40fde11ab13a973395c1dcd41f3e5cfe132639cc0bcec6"),
    # 25,000 nodes: tower 0 (10,469 with the inputs), tower 1 (10,464) and a cut tower 2
    "three_towers": (dict(nodes=25000, steps=2), "8f9ae5796d56342cf6ea2a177e06b803059caa6c753e68464df61d5fb6430bf3"),
    "three_towers_knobs": (dict(nodes=25000, steps=1, dense_fraction=0.5, trace_depth=(3, 25), odd_attrs=True,
                                gpu=False, seed=7),
                           "0c9124821299782c045645bde7aea7eac81f20b4e9f8dc720932c4f3ffc7060f"),
}


def _digest(kw: dict) -> str:
    kw = dict(kw)
    return hashlib.sha256(synth.generate(kw.pop("nodes"), kw.pop("steps"), **kw)).hexdigest()


@pytest.mark.parametrize("name", list(PINNED))
def test_output_unchanged(name: str) -> None:
    kw, digest = PINNED[name]
    assert _digest(kw) == digest


def test_small_buffer_same_output(monkeypatch) -> None:
    # the buffer then holds two nodes' worth at most: every chunk boundary must be seamless
    monkeypatch.setattr(synth, "CHUNK_BYTES", 1)
    kw, digest = PINNED["default_2000x3"]
    assert _digest(kw) == digest


def test_write_profile_matches_generate(tmp_path: Path) -> None:
    path = tmp_path / "p.pb"
    size = synth.write_profile(path, 500, 2, seed=3)
    data = path.read_bytes()
    assert size == len(data) and data == synth.generate(500, 2, seed=3)


def test_permutation_is_numpys() -> None:
    # the PCG64 in numba makes Generator.permutation's draws and leaves the same state
    rng = np.random.default_rng(11)
    rng.random(3)  # leaves a state with and without a buffered 32-bit half along the way
    st = kernels.pcg_get(rng)
    perm = np.empty(300, np.int64)
    for k in [0, 1, 2, 3, 5, 7, 13, 40, 300] * 30:
        expected = rng.permutation(k)
        kernels.permute(st, perm, k, True)
        assert (perm[:k] == expected).all(), k
        other = np.random.default_rng()
        kernels.pcg_set(other, st)
        assert other.bit_generator.state == rng.bit_generator.state
