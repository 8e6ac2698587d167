#!/usr/bin/env python3
"""The default pair against SGLang's cache-aware router, D²LPM and VTC: docs/design/fair_router.md.

A command line of :mod:`sglang_fair.experiments.fair_router` (``--help``).
"""

from sglang_fair.experiments.fair_router import main

if __name__ == "__main__":
    raise SystemExit(main())
