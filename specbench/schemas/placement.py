"""meta.json ``parallel``: how a parallel run placed its configs (``run.parallel``): the mode, the
GPUs or the Ray cluster, and where each config's worker ran."""

from __future__ import annotations

from dataclasses import dataclass

from .record import Record, key


@dataclass
class WorkerPlace(Record):
    """Where one config's worker ran, its server log on a Ray node, and how it ended."""

    gpus: str | None = key('the GPU ids its server got (CUDA_VISIBLE_DEVICES)')
    port: int | None = key("its server's port")
    host: str | None = key('the host it ran on')
    node: str | None = key('the Ray node id (null: not Ray)')
    started_at: str | None = key('when the worker started (UTC)')
    log_on_node: str | None = key("its server log's path on the Ray node")
    steplog_on_node: str | None = key("its latest server's step-log folder on the Ray node (copied back cell by cell)")
    finished_at: str | None = key('when it finished (UTC)')
    traceback: str | None = key('how it failed, where it did')


@dataclass
class Placement(Record):
    """``gpus``: the machine's GPU ids; ``address``: the Ray cluster's (null: the local one)."""

    mode: str | None = key('gpus or ray')
    gpus: list[str] | None = key("the machine's GPU ids (--parallel gpus)")
    address: str | None = key("the Ray cluster's address (null: the local one)")
    gpus_per_server: int | None = key('GPUs each server gets')
    configs: dict[str, WorkerPlace] | None = key('per config: where its worker ran')
    ray_version: str | None = key("Ray's version")
    nodes: int | None = key('Ray nodes in the cluster')
    cluster_resources: dict[str, float] | None = key("the Ray cluster's resources")

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
