"""The small typed records passed between pipeline stages.

Everything here is plain data: prompts go into the driver, ``RequestRecord`` comes out of the
client, and the pure metric functions read nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .record import Record, key
from .run_files import REQUESTS, SLO_PROBES


@dataclass(frozen=True)
class TraceLine:
    """One request of a timestamped trace (``load.arrival: trace``, read by ``suite/arrival.py``): when it
    arrives (seconds after the trace's first request, ``time_scale`` applied), the lengths it asks for,
    and its text and session where the trace has them."""

    at_s: float
    output_length: int
    input_length: int | None = None
    text: str | None = None
    session_id: str | None = None
    line: int = 0  # its line in the trace file, from 1 (a CSV's header is line 1)


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
    trace: TraceLine | None = None  # a trace's request: its own arrival time and max_tokens (load/trace.py)
    #: shared-prefix sets: the group whose prefix it shares (None: no group), and whether it is the group's
    #: first prompt in sending order, the one that finds no cached prefix (None: no group)
    group: str | None = None
    group_first: bool | None = None


@dataclass
class RequestRecord(Record):
    """Everything measured about one streamed request (a line of requests.jsonl); times are
    ``time.perf_counter()`` seconds on the client's clock."""

    FILE: ClassVar[str] = f"{REQUESTS} line"
    KEEP_NONE: ClassVar[bool] = True

    prompt_id: str = key("the prompt's id in its data set", required=True)
    dataset: str = key("the data set's name", required=True)
    config: str = key("the config (server) it was sent to", required=True)
    turn: int = key("the turn of a multi-turn conversation, from 0", default=0, low=0)
    category: str | None = key("the prompt's category, where its data set has them")
    phase: str = key('"measure", "warmup" (written, never counted) or "superseded" (cut by a stop; measured again)',
                     default="measure")
    send_time: float = key("when the request was handed to the transport", default=0.0)
    chunk_times: list[float] = key("when each streamed chunk arrived", factory=list)
    chunk_tokens: list[int] = key("tokens in each chunk (``token_source`` says counted how)", factory=list)
    token_source: str = key("where the chunk token counts came from: usage, logprobs, token ids, text", default="none")
    token_warning: str | None = key("the server's counts contradicted the stream; says which source was used")
    prompt_tokens: int | None = key("prompt tokens, as the server's usage reported them", low=0)
    output_tokens: int | None = key("output tokens", low=0)
    text: str = key("the generated text", default="")
    finish_reason: str | None = key("the server's finish reason")
    error: str | None = key("why the request failed (null: it did not)")
    spec_stats: dict[str, Any] | None = key("the engine's own per-request speculation stats, where it sends them")
    output_token_ids: list[int] | None = key("the generated token ids, where the server returned them")
    concurrency: int | None = key("streams in flight (closed loop) or the in-flight cap (open loop) of its phase", low=0)
    repeat: int = key("the repeat of its cell, from 0", default=0, low=0)
    request_rate: float | None = key("open loop: the phase's arrival rate per second (part of the cell's identity)")
    grade: dict[str, Any] | None = key("the grader's verdict on the answer (load.grade)")
    end_time: float | None = key("when it ended: the read that ended its stream, else when the client gave up on it")
    prompt_tokens_o200k: int | None = key("o200k_base tokens of the texts it sent (measure/o200k.py)", low=0)
    chunk_read_times: list[float] | None = key("openai SDK client only: when the read that completed each chunk "
                                               "came off the transport")
    scheduled_time: float | None = key("open loop: when its arrival was due, on send_time's clock (a later turn: "
                                       "when the turn before it ended); the client sent it at send_time, never earlier",
                                       omit_none=True)
    trace_line: int | None = key("load.arrival trace: the trace file's line it replays", low=1, omit_none=True)
    trace_session: str | None = key("load.arrival trace: the line's session id, where the trace has one", omit_none=True)
    trace_input_length: int | None = key("load.arrival trace: the input tokens the line asks for (the prompt is built "
                                         "to about that many, load/trace.py)", low=0, omit_none=True)
    trace_output_length: int | None = key("load.arrival trace: the output tokens the line asks for (sent as max_tokens, "
                                          "at least 1)", low=0, omit_none=True)
    cached_tokens: int | None = key("prompt tokens the server served from its prefix cache, as its usage reported "
                                    "them (usage.prompt_tokens_details.cached_tokens: vLLM with "
                                    "--enable-prompt-tokens-details, SGLang with --enable-cache-report)", low=0,
                                    omit_none=True)
    prefix_group: str | None = key("shared-prefix sets: the group whose prefix its prompt shares (the prompt's "
                                   "``group``); the cache split pairs a group's cold and cached requests",
                                   omit_none=True)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.chunk_times)

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.send_time if self.chunk_times else None

    @property
    def latency(self) -> float | None:
        return self.chunk_times[-1] - self.send_time if self.chunk_times else None

    @property
    def behind_schedule(self) -> float | None:
        """Seconds the client sent it after it was due (open loop): time the server never saw."""
        return None if self.scheduled_time is None or not self.send_time else self.send_time - self.scheduled_time

    @property
    def ttft_from_schedule(self) -> float | None:
        """TTFT from when it was due, not when it was sent: a late client shows as waiting, not as a fast server."""
        return self.chunk_times[0] - self.scheduled_time if self.chunk_times and self.scheduled_time is not None else None

    @property
    def latency_from_schedule(self) -> float | None:
        return self.chunk_times[-1] - self.scheduled_time if self.chunk_times and self.scheduled_time is not None else None


@dataclass
class ProbeRequest(RequestRecord):
    """One request of the SLO capacity search (a line of slo_probes.jsonl): a request record and the
    arrival rate its probe sent it at."""

    FILE: ClassVar[str] = f"{SLO_PROBES} line"

    probe_rate: float | None = key("the probe's arrival rate per second", low=0)

    @classmethod
    def of(cls, record: RequestRecord, rate: float) -> ProbeRequest:
        return cls(**{name: getattr(record, name) for name in RequestRecord.specs()}, probe_rate=rate)
