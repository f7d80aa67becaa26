"""Bring servers up and down: engine descriptions from ``launchers/*.yaml`` + process lifecycle."""

from .engines import Engine, known_engines, read_engine
from .process import ServerProcess, kill_all, reap_all

__all__ = ["Engine", "ServerProcess", "known_engines", "kill_all", "read_engine", "reap_all"]
