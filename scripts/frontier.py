#!/usr/bin/env python3
"""The frontier: every routing and admission pair side by side at every operating point.

A command line of :mod:`sglang_fair.experiments.frontier` (``--help``).
"""

from sglang_fair.experiments.frontier import main

if __name__ == "__main__":
    raise SystemExit(main())
