#!/usr/bin/env python3
"""Does d2lpm_guarded remove D²LPM's herding?.

A command line of :mod:`sglang_fair.experiments.herding` (``--help``).
"""

from sglang_fair.experiments.herding import main

if __name__ == "__main__":
    raise SystemExit(main())
