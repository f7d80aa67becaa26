"""launched.json's entries: what tells a server process apart from a later one given the same pid.

Written by the run (``launch.owned.process_identity``) while a server it launched runs, read by a
later run to stop what a killed one left behind (``launch.owned.stop_leftover``), and kept in
meta.json ``runs[].stopped_leftovers`` for each one stopped. Read leniently: a wrong value is dropped,
and an identity missing its pid or start time matches no process.
"""

from __future__ import annotations

from dataclasses import dataclass

from .record import Record, key


@dataclass
class ProcessIdentity(Record):
    """A process's pid, its start time (clock ticks since boot), the boot and the host."""

    pid: int | None = key("the server's process id")
    start_ticks: int | None = key('its start time, clock ticks since boot (/proc/<pid>/stat)')
    boot_id: str | None = key('the boot it started in')
    host: str | None = key('the host it ran on')


@dataclass
class StoppedLeftover(Record):
    """meta.json ``runs[].stopped_leftovers[]``: the config whose leftover server was stopped, and its identity."""

    config: str | None = key('the config whose server it was')
    pid: int | None = key("the server's process id")
    start_ticks: int | None = key('its start time, clock ticks since boot (/proc/<pid>/stat)')
    boot_id: str | None = key('the boot it started in')
    host: str | None = key('the host it ran on')

    @classmethod
    def of(cls, config: str, identity: ProcessIdentity) -> StoppedLeftover:
        return cls.from_dict({"config": config, **identity.to_dict()}, "stopped_leftovers")
