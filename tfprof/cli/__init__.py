"""The command line: one-shot tfprof commands and the interactive ``tfprof>`` shell, over ``tfprof.api``."""
