"""The SGLang adapter of sglang-fair: DLPM and VTC inside SGLang's scheduler, via SGLang's plugins.

Entry point (``sglang.srt.plugins`` group, name ``sglang_fair``): :func:`load`, which SGLang's
``load_plugins()`` calls in every process (HTTP server, schedulers, detokenizer) before it applies
the registered hooks. Importing this package does not import SGLang.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile

PLUGIN_NAME = "sglang_fair"
logger = logging.getLogger("sglang_fair")


def load() -> None:
    """Register the hooks and add ``dlpm``/``vtc`` to ``--schedule-policy``'s choices."""
    from sglang_fair.sglang_plugin.config import ENV_STATE_DIR
    from sglang_fair.sglang_plugin.hooks import extend_schedule_policy_choices, register_hooks

    if not os.environ.get(ENV_STATE_DIR):  # the main process picks it; children inherit it
        directory = tempfile.mkdtemp(prefix="sglang-fair-")
        os.environ[ENV_STATE_DIR] = directory
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    extend_schedule_policy_choices()
    register_hooks()
    logger.info("sglang-fair plugin loaded (pid %d)", os.getpid())
