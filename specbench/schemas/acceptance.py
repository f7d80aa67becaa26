"""The acceptance window: what a server's spec-decode counters said over one measured phase, the
``acceptance`` object of a phases.jsonl line. The run stage stores it, the measure stage pools it,
both by attribute. ``keys`` is the object's layout (which keys, in which order: the engine families
write different ones), so a line read and written back by ``--resume`` stays byte-identical, an
older version's line included; keys this version does not know ride along in ``extra``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

POSITION = "acceptance_pos_"  # acceptance_pos_1..n: drafts whose first i tokens were all accepted ÷ drafts

#: the scalar keys, each a field of the same name
SCALARS = ("acceptance_rate", "mean_acceptance_length", "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens",
           "acceptance_error", "acceptance_source", "sglang_generation_tokens", "sglang_verify_calls",
           "sglang_finished_requests")


def _position(key: str) -> int | None:
    """i for ``acceptance_pos_i`` (i ≥ 1), else None."""
    tail = key[len(POSITION):] if key.startswith(POSITION) else ""
    return int(tail) if tail.isdigit() and int(tail) >= 1 else None


@dataclass(frozen=True)
class AcceptanceWindow:
    """One phase's acceptance from two /metrics scrapes; null (never 0) where not measured."""

    acceptance_rate: float | None = None
    positions: tuple[float | None, ...] = ()  # acceptance_pos_1..n
    mean_acceptance_length: float | None = None
    acceptance_per_position: tuple[float | None, ...] | None = None
    spec_drafts: int | None = None  # vLLM's raw counter deltas: repeats pool exactly
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    acceptance_error: str | None = None
    acceptance_source: str | None = None
    sglang_generation_tokens: int | None = None  # SGLang's raw counter deltas
    sglang_verify_calls: int | None = None
    sglang_finished_requests: int | None = None
    keys: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def position(self, i: int) -> float | None:
        """acceptance_pos_i, null when not measured."""
        return self.positions[i - 1] if 1 <= i <= len(self.positions) else None

    def draft_counts(self) -> tuple[int, int, int] | None:
        """(drafts, drafted tokens, accepted tokens) when the window drafted: vLLM's raw deltas."""
        if not self.spec_drafts or self.spec_draft_tokens is None or self.spec_accepted_tokens is None:
            return None
        return self.spec_drafts, self.spec_draft_tokens, self.spec_accepted_tokens

    def verify_counts(self) -> tuple[int, int] | None:
        """(generated tokens, verify calls) when the window verified: SGLang's raw deltas."""
        if not self.sglang_verify_calls or self.sglang_generation_tokens is None:
            return None
        return self.sglang_generation_tokens, self.sglang_verify_calls

    def with_error(self, error: str | None) -> AcceptanceWindow:
        """The same window with ``acceptance_error`` replaced (kept in its place in the layout)."""
        keys = self.keys if "acceptance_error" in self.keys else (*self.keys, "acceptance_error")
        return replace(self, acceptance_error=error, keys=keys)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for key in self.keys:
            i = _position(key)
            if i is not None:
                out[key] = self.position(i)
            elif key == "acceptance_per_position":
                out[key] = None if self.acceptance_per_position is None else list(self.acceptance_per_position)
            elif key in SCALARS:
                out[key] = getattr(self, key)
            else:
                out[key] = self.extra.get(key)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AcceptanceWindow:
        """The window as written (phases.jsonl, or a reader's dict); values are stored as given."""
        found = {i: d[key] for key in d if (i := _position(key)) is not None}
        per = d.get("acceptance_per_position")
        return cls(positions=tuple(found.get(i) for i in range(1, max(found, default=0) + 1)),
                   acceptance_per_position=tuple(per) if isinstance(per, (list, tuple)) else None,
                   keys=tuple(d), extra={k: v for k, v in d.items() if k not in SCALARS and _position(k) is None
                                         and k != "acceptance_per_position"},
                   **{k: d.get(k) for k in SCALARS})
