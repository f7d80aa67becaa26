"""The report's plots, one module each: a captioned ``<figure>`` of inline SVG that says how its
numbers were computed; a null value is written "not measured" on the plot, never drawn as 0.
Drawn with ``report/svg.py`` over ``report/model.Model``.
"""

from .acceptance import acceptance_plot
from .accepted import accepted_plot
from .category import category_plot
from .common import ci_of, nm_html
from .decomposition import decomposition_plot
from .latency import cdf_points, latency_plot
from .load import crossings, load_plot
from .requests import request_scatter
from .speedup import speedup_plot
from .trend import TrendRun, trend_plot
from .tune import tune_section
from .whatif import whatif_section

__all__ = ["TrendRun", "accepted_plot", "acceptance_plot", "category_plot", "cdf_points", "ci_of", "crossings",
           "decomposition_plot", "latency_plot", "load_plot", "nm_html", "request_scatter", "speedup_plot", "trend_plot",
           "tune_section", "whatif_section"]
