"""The small typed records passed between pipeline stages.

Everything here is plain data: prompts go into the driver, ``RequestRecord`` comes out of the
client, and the pure metric functions read nothing else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Prompt:
    """One benchmark item.

    ``turns`` holds the user turns; more than one means a multi-turn conversation in which the
    model's own earlier answers are fed back (MT-Bench style), each turn measured as a request.
    """

    id: str
    dataset: str
    turns: tuple[str, ...]
    category: str | None = None
    system: str | None = None


@dataclass
class RequestRecord:
    """Everything measured about one streamed request; times are ``time.perf_counter()`` seconds."""

    prompt_id: str
    dataset: str
    config: str
    turn: int = 0
    category: str | None = None
    phase: str = "measure"  # "warmup" records are written but never counted
    send_time: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    token_source: str = "none"
    token_warning: str | None = None  # the server's counts contradicted the stream; says which source was used
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    text: str = ""
    finish_reason: str | None = None
    error: str | None = None
    spec_stats: dict[str, Any] | None = None
    output_token_ids: list[int] | None = None
    concurrency: int | None = None
    repeat: int = 0
    request_rate: float | None = None  # open loop: the phase's arrival rate (part of the cell's identity)
    grade: dict[str, Any] | None = None  # the grader's verdict on the answer (load.grade), else None
    end_time: float | None = None  # when it ended: the read that ended its stream, else when the client gave up on it
    prompt_tokens_o200k: int | None = None  # o200k_base tokens of the texts it sent (measure/o200k.py), set after its pass
    chunk_read_times: list[float] | None = None  # openai SDK only: when the read that completed each chunk came off the transport

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.chunk_times)

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.send_time if self.chunk_times else None

    @property
    def latency(self) -> float | None:
        return self.chunk_times[-1] - self.send_time if self.chunk_times else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})
