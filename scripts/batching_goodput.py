#!/usr/bin/env python3
"""Goodput against load for the batch-formation policies, on the Azure or Mooncake trace.

A command line of :mod:`sglang_fair.experiments.goodput` (``--help``).
"""

from sglang_fair.experiments.goodput import main

if __name__ == "__main__":
    raise SystemExit(main())
