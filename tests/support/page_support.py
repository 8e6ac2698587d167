"""The schedulers' per-client figures the fairness page's tests start from (as ``/fairness`` gives them)."""

from __future__ import annotations

FAIRNESS = {"flood": {"service": 900.0, "waiting": 3, "running": 2, "requests": 9, "input_tokens": 1000,
                      "cached_tokens": 800, "output_tokens": 50, "weight": 1.0, "counter": 5.0},
            "light": {"service": 100.0, "waiting": 0, "running": 1, "requests": 4, "input_tokens": 100,
                      "cached_tokens": 0, "output_tokens": 20, "weight": 2.0, "counter": 1.0}}
