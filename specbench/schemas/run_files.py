"""The run directory's file names, spelled once: every reader and writer (run, report, gate, tune) takes
them from here, and ``--overwrite`` removes exactly ``RUN_FILES`` and ``LOGS`` (docs/run-directory.md)."""

from __future__ import annotations

REQUESTS = "requests.jsonl"
#: a run directory archived with its requests compressed (read by the report, never written)
REQUESTS_GZ = "requests.jsonl.gz"
PHASES = "phases.jsonl"
RESULTS = "results.json"
RESULTS_MD = "results.md"
META = "meta.json"
LAUNCHED = "launched.json"
SLO_PROBES = "slo_probes.jsonl"
SCHEDULE = "schedule.json"
LOGS = "logs"
#: held by the run using the directory; never removed by ``--overwrite`` (the run that overwrites holds it)
LOCK = ".specbench.lock"
QUARANTINE = {REQUESTS: "requests.quarantine.jsonl", PHASES: "phases.quarantine.jsonl"}
#: every file a run writes: a directory holding any of them holds a run, and ``--overwrite`` removes them
RUN_FILES = (META, REQUESTS, PHASES, RESULTS, RESULTS_MD, LAUNCHED, SLO_PROBES, SCHEDULE, *QUARANTINE.values())
