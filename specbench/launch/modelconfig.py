"""A Hugging Face model folder's files as ``specbench setup shape|drafter`` read them: config.json
(as JSON: no transformers import) and the tokenizer files an engine serves with."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecbenchError
from ..util.diskio import check_output_dir, output_file, write_output

#: every file of a tokenizer an engine may read, the chat template among them
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                   "vocab.txt", "tokenizer.model", "added_tokens.json", "chat_template.jinja", "chat_template.json")


def read_json(path: Path, what: str = "JSON file") -> dict[str, object]:
    """A JSON object from ``path``, or one line saying why not; its values are unchecked (the reader checks
    what it reads)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecbenchError(f"{path}: {what} not found") from None
    except OSError as err:
        raise SpecbenchError(f"{path}: cannot read {what}: {err.strerror}") from None
    except ValueError as err:
        raise SpecbenchError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise SpecbenchError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def write_json(path: Path, data: object) -> None:
    write_output(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def copy_tokenizer(src: Path, out: Path) -> list[str]:
    """Copy the tokenizer files of ``src`` present into ``out``; their names."""
    copied = []
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            with output_file(out / name) as tmp:
                shutil.copyfile(src / name, tmp)
            copied.append(name)
    return copied


def check_output(out: Path, force: bool, *sources: Path) -> None:
    """``out`` may be made: a directory that can be written, not one of the folders read, and without a
    config.json unless ``force``."""
    check_output_dir(out)
    for src in sources:
        if out.resolve() == src.resolve():
            raise SpecbenchError(f"{out}: is the folder read ({src}); choose another -o")
    if (out / "config.json").exists() and not force:
        raise SpecbenchError(f"{out}/config.json exists: choose another -o, or pass --force to replace it")


def _int(cfg: Mapping[str, object], key: str, where: Path) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecbenchError(f"{where}: {key}: expected a positive integer, got {value!r}")
    return value


@contextmanager
def config_last(out: Path) -> Iterator[None]:
    """Write a model folder so that it reads as one (its config.json) only when whole: the block writes
    config.json last; when it fails, a config.json already there (``--force``) is removed, since the
    folder now mixes old and new files."""
    try:
        yield
    except BaseException:
        (out / "config.json").unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Dims:
    """The sizes of a decoder-only target that a drafter's shapes follow."""

    model_type: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    layers: int


@dataclass(frozen=True)
class ModelConfig:
    """A target's config.json as a drafter reads it: its sizes, the keys a drafter copies (as the target
    has them: the engine reads them, specbench does not), and the whole file for a ``draft_model``
    drafter, which is the target's config with fewer layers."""

    dims: Dims
    hidden_act: object
    rms_norm_eps: object
    max_position_embeddings: object
    max_window_layers: int | None  # Qwen2's sliding-window layer count, cut to the drafter's layers
    layer_types: list[object] | None  # per-layer attention kinds, cut likewise
    attention_bias: bool
    mlp_bias: bool
    tie_word_embeddings: bool
    raw: Mapping[str, object]

    @property
    def rope_theta(self) -> float:
        """``rope_theta``, or transformers 5's ``rope_parameters.rope_theta``; 10000 when neither says."""
        params = self.raw.get("rope_parameters")
        nested = params.get("rope_theta") if isinstance(params, dict) else None
        value: Any = self.raw.get("rope_theta") or nested or 10000.0
        return float(value)

    @classmethod
    def of(cls, cfg: Mapping[str, object], where: Path) -> ModelConfig:
        """``cfg`` (config.json at ``where``) checked: a size that is not a positive integer is one line."""
        hidden, heads = _int(cfg, "hidden_size", where), _int(cfg, "num_attention_heads", where)
        kv = _int(cfg, "num_key_value_heads", where) if "num_key_value_heads" in cfg else heads
        head_dim = _int(cfg, "head_dim", where) if cfg.get("head_dim") is not None else hidden // heads
        dims = Dims(model_type=str(cfg.get("model_type", "")), hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim,
                    intermediate=_int(cfg, "intermediate_size", where), vocab=_int(cfg, "vocab_size", where),
                    layers=_int(cfg, "num_hidden_layers", where))
        window, types = cfg.get("max_window_layers"), cfg.get("layer_types")
        return cls(dims=dims, hidden_act=cfg.get("hidden_act", "silu"), rms_norm_eps=cfg.get("rms_norm_eps", 1e-5),
                   max_position_embeddings=cfg.get("max_position_embeddings", 8192),
                   max_window_layers=window if isinstance(window, int) else None,
                   layer_types=types if isinstance(types, list) else None, attention_bias=bool(cfg.get("attention_bias")),
                   mlp_bias=bool(cfg.get("mlp_bias")), tie_word_embeddings=bool(cfg.get("tie_word_embeddings")), raw=cfg)
