"""``python -m tfprof``: the command line."""

import sys

from tfprof.cli.main import main

sys.exit(main())
