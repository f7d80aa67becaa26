"""meta.json ``parallel``: how a parallel run placed its configs (``run.parallel``): the mode, the
GPUs or the Ray cluster, and where each config's worker ran."""

from __future__ import annotations

from dataclasses import dataclass

from .record import Record


@dataclass
class WorkerPlace(Record):
    """Where one config's worker ran, its server log on a Ray node, and how it ended."""

    gpus: str | None = None
    port: int | None = None
    host: str | None = None
    node: str | None = None
    started_at: str | None = None
    log_on_node: str | None = None
    finished_at: str | None = None
    traceback: str | None = None


@dataclass
class Placement(Record):
    """``gpus``: the machine's GPU ids; ``address``: the Ray cluster's (null: the local one)."""

    mode: str | None = None
    gpus: list[str] | None = None
    address: str | None = None
    gpus_per_server: int | None = None
    configs: dict[str, WorkerPlace] | None = None
    ray_version: str | None = None
    nodes: int | None = None
    cluster_resources: dict[str, float] | None = None

    def started(self, config: str, gpus: str | None, port: int | None, host: str, node: str | None, started_at: str) -> None:
        """Where config ``config``'s worker runs, a value not known written as null."""
        places = self.grown("configs", {})
        known = places[config].to_dict() if config in places else {}
        places[config] = WorkerPlace.from_dict({**known, "gpus": gpus, "port": port, "host": host, "node": node,
                                                "started_at": started_at}, f"parallel.configs.{config}")

    def place(self, config: str) -> WorkerPlace:
        """Config ``config``'s entry, added empty when it has none."""
        places: dict[str, WorkerPlace] = self.grown("configs", {})
        return places.setdefault(config, WorkerPlace())
