"""A raw line ``--resume`` could not read, as the quarantine files keep it (``schemas/run_files.QUARANTINE``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .record import Record, key


@dataclass
class QuarantinedLine(Record):
    """One unreadable line of requests.jsonl or phases.jsonl, moved aside whole by ``--resume``: never
    deleted, never counted."""

    FILE: ClassVar[str] = "*.quarantine.jsonl line"
    KEEP_NONE: ClassVar[bool] = True

    line: int = key("its line number in the raw file", required=True, low=1)
    reason: str = key("why it could not be read: not UTF-8, not JSON, or the key at fault", required=True)
    text: str = key("the line as it was (undecodable bytes replaced)", required=True)
