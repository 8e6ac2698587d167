"""A quiet start: ``serve`` keeps SGLang's known-harmless start-up noise out of its default output.

- SGLang logs at ``info`` by default: a 3 KB ``server_args`` dump, a line per model module it could not
  import, every request's access line. ``serve`` runs it at ``--log-level warning`` unless the user gives
  ``--log-level`` (``--log-level info`` gives SGLang's own output back).
- On a machine without CUDA each SGLang process warns that AWQ, GGUF and Triton need a GPU (Python
  ``UserWarning``s, ~10 per process); :data:`HARMLESS_WARNINGS` are filtered in this process and, through
  ``PYTHONWARNINGS``, in SGLang's children.

What stays: warnings and errors, this project's notices, and its one ready line (``ready.py``). What it
cannot silence is documented in docs/guides/serve.md ("What the log shows").
"""

from __future__ import annotations

import os
import warnings
from collections.abc import MutableMapping, Sequence

from sglang_fair.sglang_plugin.router_launch import find_flag

LOG_FLAG = "--log-level"
QUIET_LEVEL = "warning"
# message prefixes of the UserWarnings SGLang 0.5.23 prints on every CPU-only start ("Only CUDA, HIP and
# XPU support AWQ currently.", "Only CUDA, MUSA and NPU support GGUF ...", "Triton is not supported on
# current platform, roll back to CPU."); PYTHONWARNINGS splits on commas, so each stops before one
HARMLESS_WARNINGS = ("Only CUDA", "Triton is not supported on current platform")


def quiet_args(args: Sequence[str]) -> list[str]:
    """``args`` with ``--log-level warning`` unless the user chose a level."""
    return list(args) if find_flag(args, LOG_FLAG) is not None else [*args, LOG_FLAG, QUIET_LEVEL]


def silence_harmless_warnings(env: MutableMapping[str, str] | None = None) -> None:
    """Filter :data:`HARMLESS_WARNINGS` here and in every child process (``PYTHONWARNINGS``)."""
    env = os.environ if env is None else env
    for prefix in HARMLESS_WARNINGS:
        warnings.filterwarnings("ignore", message=prefix, category=UserWarning)
    ours = [f"ignore:{prefix}:UserWarning" for prefix in HARMLESS_WARNINGS]
    env["PYTHONWARNINGS"] = ",".join([*filter(None, env.get("PYTHONWARNINGS", "").split(",")), *ours])
