"""The paper's experiments on the simulator: the evaluation protocol, the measured capacity, the
sweeps and their tables and plots. Imports ``sim`` and never the other way round; ``sglang-fair lab``
(:mod:`sglang_fair.lab.registry`) runs their command lines."""
