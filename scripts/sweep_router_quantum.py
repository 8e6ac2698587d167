#!/usr/bin/env python3
"""Which Q^w? D²LPM over a router-quantum sweep.

A command line of :mod:`sglang_fair.experiments.router_quantum_sweep` (``--help``).
"""

from sglang_fair.experiments.router_quantum_sweep import main

if __name__ == "__main__":
    raise SystemExit(main())
