#!/usr/bin/env python3
"""Which Q^u protects a light client? DLPM and dlpm_light over a Q^u sweep.

A command line of :mod:`sglang_fair.experiments.quantum_sweep` (``--help``).
"""

from sglang_fair.experiments.quantum_sweep import main

if __name__ == "__main__":
    raise SystemExit(main())
