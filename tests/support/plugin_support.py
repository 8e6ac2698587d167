"""A stand-in for SGLang's ``Req`` (no SGLang needed)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class FakeReq:
    rid: str
    routing_key: str | None
    origin_input_ids: list[int]
    prefix_len: int = 0
    output_ids: list[int] = field(default_factory=list)
    done: bool = False

    def finished(self) -> bool:
        return self.done


