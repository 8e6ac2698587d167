"""``serve`` starts quiet: SGLang at ``--log-level warning`` unless the user chose a level, and the
CPU-only UserWarnings SGLang prints in every process filtered, here and in its children."""

from __future__ import annotations

import subprocess
import sys
import warnings

from sglang_fair.sglang_plugin.quiet import quiet_args, silence_harmless_warnings

AWQ = "Only CUDA, HIP and XPU support AWQ currently."  # SGLang 0.5.23's messages, verbatim
TRITON = "Triton is not supported on current platform, roll back to CPU."


def test_warning_is_the_default_level_and_a_chosen_level_is_kept() -> None:
    assert quiet_args(["--model-path", "m"]) == ["--model-path", "m", "--log-level", "warning"]
    assert quiet_args(["--log-level", "info"]) == ["--log-level", "info"]
    assert quiet_args(["--log-level=debug"]) == ["--log-level=debug"]


def test_the_cpu_only_warnings_are_silenced_in_child_processes() -> None:
    env = {"PYTHONWARNINGS": "default::DeprecationWarning"}
    with warnings.catch_warnings():
        silence_harmless_warnings(env)
    child = (f"import warnings\nfor m in ({AWQ!r}, {TRITON!r}, 'a real problem'):\n"
             "    warnings.warn(m, UserWarning)")
    loud = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env={}, check=True)
    assert AWQ in loud.stderr and TRITON in loud.stderr  # the noise, as SGLang's children print it
    quiet = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, check=True)
    assert AWQ not in quiet.stderr and TRITON not in quiet.stderr and "a real problem" in quiet.stderr
    assert env["PYTHONWARNINGS"].startswith("default::DeprecationWarning,")  # the user's filters kept
