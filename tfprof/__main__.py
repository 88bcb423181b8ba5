"""``python -m tfprof``: the command line (through this user's tfprof server when one is up)."""

import sys

from tfprof.cli.client import main

sys.exit(main())
