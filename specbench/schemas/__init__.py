"""The typed data passed between the stages: a cell and its load point (with the one load label),
a prompt and the record of one request, a phase of phases.jsonl, a results row and its strict
reader, a /metrics snapshot, and the run's metadata (meta.json) as a versioned record."""

from .acceptance import AcceptanceWindow
from .cell import Cell, LoadPoint, load_label
from .meta import RunMeta
from .metrics import MetricsSnapshot
from .phase import PhaseInfo
from .request import Prompt, RequestRecord
from .row import REFERENCE_KEYS, ResultRow
from .row_read import read_row, rows_from

__all__ = ["REFERENCE_KEYS", "AcceptanceWindow", "Cell", "LoadPoint", "MetricsSnapshot", "PhaseInfo", "Prompt", "RequestRecord",
           "ResultRow", "RunMeta", "load_label", "read_row", "rows_from"]
