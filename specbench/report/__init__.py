"""Reports of result rows: ``load_results`` reads run directories or results.json files, ``render``
turns rows into a text format, ``formats.FORMATS`` lists every format by name.
"""

from .formats import FORMATS, render
from .load import RunResults, load_results

__all__ = ["FORMATS", "RunResults", "load_results", "render"]
