"""What every stage may use: standard JSON out, the one rule for numbers, the one decision of what is a
secret, bounded reads of side endpoints, the run directory's single write layer, safetensors written
with numpy, bootstrap resampling a block at a time (``bootstrap``: measure's CIs and grade's alike)."""

from .diskio import append_text, write_atomic
from .jsonio import dumps
from .numbers import finite, is_number
from .redact import redact_url, scrub

__all__ = ["append_text", "dumps", "finite", "is_number", "redact_url", "scrub", "write_atomic"]
