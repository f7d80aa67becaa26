"""Reports of result rows: ``load_results`` reads run directories or results.json files, ``render``
turns rows into a text format, ``formats.FORMATS`` lists every format by name.
"""

from ..run.readback import RunResults, load_results
from .formats import FORMATS, render

__all__ = ["FORMATS", "RunResults", "load_results", "render"]
