#!/usr/bin/env python3
"""Reproduce the evaluation of [1] (DLPM / D²LPM) in the simulator.

A command line of :mod:`sglang_fair.experiments.paper` (``--help``).
"""

from sglang_fair.experiments.paper import main

if __name__ == "__main__":
    raise SystemExit(main())
