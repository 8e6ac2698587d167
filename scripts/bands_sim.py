#!/usr/bin/env python3
"""Priority bands in the simulator: an interactive tenant's P99 under a saturating batch tenant.

A command line of :mod:`sglang_fair.experiments.bands` (``--help``).
"""

from sglang_fair.experiments.bands import main

if __name__ == "__main__":
    raise SystemExit(main())
