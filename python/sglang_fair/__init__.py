"""sglang-fair: locality-aware fair scheduling for multi-tenant LLM serving.

The policy core (``sglang_fair.core``, ``sglang_fair.admission``, ``sglang_fair.routing``) is pure
Python: no torch, no SGLang, no wall clock, no globals. The same objects run in the SGLang plugin,
in the simulator and in the tests.

Docstrings cite the papers as docs/reference/references.md does:
[1] Cao et al., Locality-aware Fair Scheduling in LLM Serving (DLPM, D²LPM), arXiv:2501.14312;
[2] Sheng et al., Fairness in Serving Large Language Models (VTC), arXiv:2401.00588;
[3] Lyu et al., FairBatching: Fairness-Aware Batch Formation for LLM Inference, arXiv:2510.14392;
[4] Bari et al., Optimal Scheduling Algorithms for LLM Inference: Theory and Practice (SLAI),
    arXiv:2508.01002.
"""

__version__ = "0.1.0"
