"""Benchmark prompt sets loaded exactly as the speculative-decoding papers load them.

Public API: ``DatasetSpec`` (one suite ``datasets:`` entry), ``check_available`` (pre-flight, no
server needed), ``load_prompts`` (deterministic selection) and ``REGISTRY`` / ``RECIPES``.
See docs/datasets.md for every set's source, fields, categories and default recipe.
"""

from .loader import load_prompts, select
from .recipes import RECIPES
from .registry import REGISTRY, DatasetDef
from .sources import DATA_DIR_ENV, check_available, data_root
from .spec import DatasetSpec

__all__ = [
    "DATA_DIR_ENV",
    "RECIPES",
    "REGISTRY",
    "DatasetDef",
    "DatasetSpec",
    "check_available",
    "data_root",
    "load_prompts",
    "select",
]
