"""Renderers of one table model: the list of per-cell result records.

``load_results`` reads run directories or results.json files; ``render`` turns records into
markdown, JSON or CSV.
"""

from .load import RunResults, load_results
from .render import FORMATS, render

__all__ = ["FORMATS", "RunResults", "load_results", "render"]
