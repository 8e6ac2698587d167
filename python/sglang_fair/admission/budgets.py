"""Simple budgets for hosts that count requests rather than KV tokens (tests, benchmarks)."""

from __future__ import annotations

from sglang_fair.admission.base import WaitingRequest


class SlotBudget:
    """Admits up to ``slots`` requests whose input is at most ``max_input`` tokens."""

    def __init__(self, slots: int, max_input: int | None = None) -> None:
        self.slots = slots
        self.max_input = max_input

    def try_add(self, req: WaitingRequest) -> bool:
        if self.slots <= 0 or (self.max_input is not None and req.input_len > self.max_input):
            return False
        self.slots -= 1
        return True

    def exhausted(self) -> bool:
        return self.slots <= 0

    def room(self) -> int:
        return max(self.slots, 0)
