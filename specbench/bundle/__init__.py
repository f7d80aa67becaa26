"""``specbench setup bundle``: an engine and what it needs, packed for an offline GPU host.

Air-gapped GPU hosts usually have Python, torch and the CUDA libraries but no engine and no
network. This resolves the engine's requirements for the host's Python and platform with pip
(metadata only), leaves out what the host already has in a compatible version (its ``pip inspect``
or ``pip list``) and what the run does not need (``--exclude``: kernels packages, torch and the
CUDA wheels the host ships), keeps what it packs acceptable to the host packages the engine still
uses (``hostreqs``), downloads the rest as wheels and writes one archive split into parts of a
chosen size, a manifest with the sha256 of every part and wheel, and ``unpack.py``, which needs
only the host's Python: it checks and joins the parts, unzips every wheel into one folder meant for
``PYTHONPATH`` (no pip, no venv) and imports the engine's model path from there before it says ready.
"""

from .build import build_bundle
from .plan import DEFAULT_EXCLUDE, DEFAULT_KEEP_HOST, FORMAT, parse_host_packages, parse_size, plan_bundle, platform_tags

__all__ = ["DEFAULT_EXCLUDE", "DEFAULT_KEEP_HOST", "FORMAT", "build_bundle", "parse_host_packages", "parse_size", "plan_bundle", "platform_tags"]
