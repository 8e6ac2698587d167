"""A server's private temp directories (state files, router sockets), swept once their owner is gone.

SGLang ends its process tree with signals when it shuts down, so the main process's own clean-up
(``atexit``, ``finally``) does not always run. Each directory records its owner's pid; creating a
new one first removes those of the same prefix whose owner no longer runs.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

OWNER = "owner.pid"


def private_dir(prefix: str, root: str | None = None) -> str:
    """A fresh directory owned by this process (removed at exit, or by a later :func:`sweep`)."""
    sweep(prefix, root)
    path = tempfile.mkdtemp(prefix=prefix, dir=root)
    Path(path, OWNER).write_text(str(os.getpid()))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def sweep(prefix: str, root: str | None = None) -> int:
    """Remove ``prefix*`` directories whose owner process is gone; return how many."""
    removed = 0
    for path in Path(root or tempfile.gettempdir()).glob(prefix + "*"):
        try:
            owner = int((path / OWNER).read_text())
        except (OSError, ValueError):
            continue  # not one of ours, or being created right now
        if not _running(owner):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True
