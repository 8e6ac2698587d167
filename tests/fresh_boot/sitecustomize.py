"""Make every Python process see a monotonic clock that started about a minute ago, as on a freshly
booted machine (a new GPU node, a CI runner, a restarted VM), while keeping one clock for all processes
of a run: a server and its children agree.

    export FRESH_BOOT_OFFSET=$(awk '{print $1 - 60}' /proc/uptime)
    PYTHONPATH=tests/fresh_boot${PYTHONPATH:+:$PYTHONPATH} <command>

Every Python process started with that environment reads ``time.monotonic()`` = real - offset, which
starts near 60 s. Without FRESH_BOOT_OFFSET it changes nothing. Any other sitecustomize further down
sys.path (this one shadows it) is run afterwards. Used by ``scripts/test_fresh_boot.sh``; taken from the
workplace's fresh_boot tool.
"""
import contextlib
import importlib.util
import os
import sys
import time

_offset = float(os.environ.get("FRESH_BOOT_OFFSET", "0") or 0)
if _offset > 0:
    _real, _real_ns = time.monotonic, time.monotonic_ns
    _offset_ns = int(_offset * 1e9)
    time.monotonic = lambda: _real() - _offset
    time.monotonic_ns = lambda: _real_ns() - _offset_ns

_here = os.path.dirname(os.path.abspath(__file__))
for _dir in sys.path:
    _path = os.path.join(_dir or ".", "sitecustomize.py")
    if os.path.abspath(_dir or ".") != _here and os.path.isfile(_path):
        _spec = importlib.util.spec_from_file_location("_next_sitecustomize", _path)
        if _spec and _spec.loader:
            with contextlib.suppress(Exception):  # the shadowed one failing must not break the run
                _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        break
