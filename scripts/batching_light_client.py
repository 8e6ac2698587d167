#!/usr/bin/env python3
"""A light client beside a flood under each batch-formation and admission policy.

A command line of :mod:`sglang_fair.experiments.light_client` (``--help``).
"""

from sglang_fair.experiments.light_client import main

if __name__ == "__main__":
    raise SystemExit(main())
