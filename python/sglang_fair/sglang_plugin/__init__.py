"""The SGLang adapter of sglang-fair: DLPM and VTC inside SGLang's scheduler, via SGLang's plugins.

Entry point (``sglang.srt.plugins`` group, name ``sglang_fair``): :func:`load`, which SGLang's
``load_plugins()`` calls in every process (HTTP server, schedulers, detokenizer) before it applies
the registered hooks. Importing this package does not import SGLang.
"""

from __future__ import annotations

import logging
import os

PLUGIN_NAME = "sglang_fair"
logger = logging.getLogger("sglang_fair")


def load() -> None:
    """Check that SGLang is the pinned version with every name the plugin uses in place
    (``fence.py``; raises :class:`~sglang_fair.sglang_plugin.fence.SGLangMoved` and hooks nothing if
    not), then register the hooks and add ``dlpm``/``vtc`` to ``--schedule-policy``'s choices."""
    from sglang_fair.sglang_plugin import fence
    from sglang_fair.sglang_plugin.config import ENV_STATE_DIR
    from sglang_fair.sglang_plugin.hooks import extend_schedule_policy_choices, register_hooks
    from sglang_fair.sglang_plugin.tmpdirs import private_dir

    try:
        fence.check()
    except fence.SGLangMoved as err:
        logger.error("%s", err)
        raise

    if not os.environ.get(ENV_STATE_DIR):  # the main process picks it; children inherit it
        os.environ[ENV_STATE_DIR] = private_dir("sglang-fair-")
    extend_schedule_policy_choices()
    register_hooks()
    logger.info("sglang-fair plugin loaded (pid %d)", os.getpid())
