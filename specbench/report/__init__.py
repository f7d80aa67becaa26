"""Reports of result rows, formatting only: ``render`` turns rows into a text format, ``formats.FORMATS``
lists every format by name. The runs are read by the run stage (``run.readback``, ``run.history``), judged by
the gate's (``gate.workflow``), and handed here as rows.
"""

from .formats import FORMATS, render

__all__ = ["FORMATS", "render"]
