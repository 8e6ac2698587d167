"""sglang-fair: locality-aware fair scheduling for multi-tenant LLM serving.

The policy core (``sglang_fair.core``, ``sglang_fair.admission``, ``sglang_fair.routing``) is pure
Python: no torch, no SGLang, no wall clock, no globals. The same objects run in the SGLang plugin,
in the simulator and in the tests.
"""

__version__ = "0.1.0"
