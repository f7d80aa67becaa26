"""meta.json ``servers.<config>.accelerator``: the accelerator a config's server was given, as the run read it
when the server was ready (``run.telemetry.read_accelerator``: NVML, else ``nvidia-smi``), and the short
label the export files it under (``slug``).

The slug is the GPU's model in lower case, from the name the driver gives: vendor words (NVIDIA, Tesla,
GeForce, Quadro, AMD, Instinct, Radeon) dropped, then the words up to and including the first one that holds a
digit, that word cut at its first ``-``, joined without spaces: "NVIDIA H200" → ``h200``, "NVIDIA H100 80GB
HBM3" → ``h100``, "NVIDIA A100-SXM4-80GB" → ``a100``, "NVIDIA GeForce RTX 4090" → ``rtx4090``. A server given
GPUs of different models: their slugs joined by ``_``. No accelerator named (a CPU engine, or none seen):
``cpu``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .record import Record, key

VENDOR_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro", "amd", "instinct", "radeon"})
NAMES_SEP = " + "  # several models in one server's name
NO_ACCELERATOR = "cpu"


def model_slug(name: str) -> str:
    """One GPU model's slug (see the module's docstring); ``unknown`` for a name with no usable word."""
    out = []
    for word in (w for w in re.split(r"[\s_]+", name.lower()) if w and w not in VENDOR_WORDS):
        if any(c.isdigit() for c in word):
            out.append(word.split("-")[0] if any(c.isdigit() for c in word.split("-")[0]) else word)
            break
        out.append(word)
    return re.sub(r"[^a-z0-9]", "", "".join(out)) or "unknown"


@dataclass
class Accelerator(Record):
    """What a config's server ran on: read once per server start, on the machine the server ran on."""

    name: str | None = key("the accelerator's model as its driver names it (NVIDIA H200); models joined by ' + ' "
                           "when they differ; null: none named", max_len=300)
    count: int | None = key("accelerators the server was given (0: none, a CPU engine); null: not known", low=0)
    memory_mib: int | None = key("memory of each, MiB (the smallest when they differ)", low=0)
    driver: str | None = key("the driver's version", max_len=100)
    cuda: str | None = key("the CUDA version the driver supports (NVML only)", max_len=100)
    gpus: list[str] | None = key("the ids read (configs[].gpus, else the server's CUDA_VISIBLE_DEVICES, else the first N)")
    source: str | None = key("where it was read: nvml, nvidia-smi, or none (no accelerator: a CPU engine)")
    why: str | None = key("why no accelerator is named, or why a value is missing")

    @property
    def slug(self) -> str:
        """The export's ``gpu`` label: the model's slug, ``cpu`` when no accelerator was named."""
        if not self.name:
            return NO_ACCELERATOR
        return "_".join(dict.fromkeys(model_slug(n) for n in self.name.split(NAMES_SEP)))
