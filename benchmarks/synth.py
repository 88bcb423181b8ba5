"""Write a synthetic ProfileProto (no TensorFlow): ``python benchmarks/synth.py --nodes N --steps S --out F``.

The generator lives in ``synthlib.py`` and is always imported under that one module name, so the
numba cache of its kernels is shared by this script, the benchmarks and the tests (a cache
written under one module name cannot be loaded under another).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthlib import main  # noqa: E402

if __name__ == "__main__":
    main()
