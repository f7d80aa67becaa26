"""Suite files: YAML → validated, typed ``Suite``.

Every problem is reported before anything runs, one line each, naming the file and the key.
``yamlfile`` reads bounded YAML, ``checks`` holds the schema and shared checks, ``parse`` builds
the ``model`` dataclasses block by block.
"""

from ..schemas.cell import find_baseline
from .checks import CLIENTS, ENDPOINTS, NAME_RE, WORKLOADS
from .model import LaunchSettings, LoadSpec, ServerConfig, Suite
from .parse import parse_suite, read_suite
from .yamlfile import MAX_NODES, read_yaml

__all__ = [
    "CLIENTS", "ENDPOINTS", "MAX_NODES", "NAME_RE", "WORKLOADS", "LaunchSettings", "LoadSpec", "ServerConfig", "Suite",
    "find_baseline", "read_suite", "parse_suite", "read_yaml",
]
