"""``specbench setup shape``: a model folder with no weights, for an engine's ``--load-format dummy``.

A target of realistic size (an 8B config.json, public) is served with random weights, which the
engine makes from config.json alone; it still needs a tokenizer and a chat template (vLLM 0.26
answers every chat request with HTTP 400 without one). The tokenizer may come from another model,
so the config is reconciled with it: ``vocab_size`` becomes the tokenizer's size (a random model
samples every id of its vocabulary, and an id the tokenizer lacks cannot be detokenized), and
bos/eos/pad ids outside it become the tokenizer's. Every change is said on stderr and recorded,
old → new, in ``specbench_shape.json`` beside config.json.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..errors import SpecbenchError
from ..util.diskio import make_output_dir, write_output
from .modelconfig import check_output, config_last, copy_tokenizer, read_json, write_json

RECORD = "specbench_shape.json"
#: config id keys and the tokenizer_config.json token each is read from
SPECIAL_IDS = {"bos_token_id": "bos_token", "eos_token_id": "eos_token", "pad_token_id": "pad_token"}


@dataclass(frozen=True)
class Tokenizer:
    """What a shape needs of a tokenizer folder: its size, its special tokens' ids, its chat template."""

    path: Path
    size: int
    special_ids: dict[str, int | None] = field(default_factory=dict)  # "bos_token" → id (None: the tokenizer has none)
    chat_template: str | None = None  # where the template is, or None


def _ids(tok: Mapping[str, object], where: Path) -> dict[str, int]:
    """token → id of tokenizer.json's model vocabulary (a mapping, or Unigram's [piece, score] list) and added tokens."""
    model = tok.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, dict):
        ids = {str(k): v for k, v in vocab.items() if isinstance(v, int) and not isinstance(v, bool)}
    elif isinstance(vocab, list):
        ids = {str(p[0]): i for i, p in enumerate(vocab) if isinstance(p, list) and p}
    else:
        raise SpecbenchError(f"{where}: model.vocab: expected a mapping or a list, got {type(vocab).__name__}")
    added_tokens = tok.get("added_tokens")
    for added in added_tokens if isinstance(added_tokens, list) else []:
        if isinstance(added, dict) and isinstance(added.get("id"), int) and isinstance(added.get("content"), str):
            ids[added["content"]] = added["id"]
    if not ids:
        raise SpecbenchError(f"{where}: no tokens (model.vocab and added_tokens are empty)")
    return ids


def _token(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _chat_template(d: Path, config: Mapping[str, object]) -> str | None:
    if (d / "chat_template.jinja").is_file():
        return str(d / "chat_template.jinja")
    if (d / "chat_template.json").is_file() and read_json(d / "chat_template.json", "chat template").get("chat_template"):
        return str(d / "chat_template.json")
    if config.get("chat_template"):
        return f"{d / 'tokenizer_config.json'} (chat_template)"
    return None


def read_tokenizer(d: Path) -> Tokenizer:
    """The tokenizer in folder ``d`` (tokenizer.json, else vocab.json + added_tokens.json), read as JSON."""
    if not d.is_dir():
        raise SpecbenchError(f"{d}: tokenizer folder not found")
    if (d / "tokenizer.json").is_file():
        ids = _ids(read_json(d / "tokenizer.json", "tokenizer"), d / "tokenizer.json")
    elif (d / "vocab.json").is_file():
        ids = {str(k): v for k, v in read_json(d / "vocab.json", "vocabulary").items() if isinstance(v, int)}
        if (d / "added_tokens.json").is_file():
            ids.update({str(k): v for k, v in read_json(d / "added_tokens.json", "added tokens").items() if isinstance(v, int)})
    else:
        raise SpecbenchError(f"{d}: no tokenizer.json or vocab.json (a tokenizer.model-only folder: save it with "
                             "transformers' save_pretrained first, which writes tokenizer.json)")
    config: dict[str, object] = read_json(d / "tokenizer_config.json", "tokenizer config") if (d / "tokenizer_config.json").is_file() else {}
    if not any(_token(config.get(k)) for k in SPECIAL_IDS.values()) and (d / "special_tokens_map.json").is_file():
        config = {**read_json(d / "special_tokens_map.json", "special tokens map"), **config}
    specials = {name: ids.get(_token(config.get(name)) or "") for name in SPECIAL_IDS.values()}
    return Tokenizer(path=d, size=max(ids.values()) + 1, special_ids=specials, chat_template=_chat_template(d, config))


def _in_range(value: object, size: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size


@dataclass(frozen=True)
class Change:
    """One config key reconciled with the tokenizer: its value before and after (None: absent or null)."""

    old: object
    new: object


def reconcile(config: Mapping[str, object], tok: Tokenizer) -> tuple[dict[str, object], dict[str, Change]]:
    """``config`` (a model's config.json, written back whole) agreeing with ``tok``, and each changed key's change."""
    out = dict(config)
    changed: dict[str, Change] = {}
    if out.get("vocab_size") != tok.size:
        out["vocab_size"] = tok.size
    for key, token in SPECIAL_IDS.items():
        if key not in out:
            continue
        old = out[key]
        new: object
        if isinstance(old, list):
            kept = [v for v in old if _in_range(v, tok.size)]
            new = kept if kept else tok.special_ids.get(token)
        else:
            new = old if _in_range(old, tok.size) else tok.special_ids.get(token)
        if key == "pad_token_id" and new is None:
            new = tok.special_ids.get("eos_token")
        out[key] = new
    for key in out:
        if out[key] != config.get(key):
            changed[key] = Change(old=config.get(key), new=out[key])
    return out, changed


@dataclass(frozen=True)
class ShapeRecord:
    """What ``setup shape`` made (``specbench_shape.json``, beside the shaped config.json)."""

    made_by: str
    config: str
    tokenizer: str
    tokenizer_size: int
    chat_template: str  # the file given, else where the tokenizer has it
    changed: dict[str, Change]
    files: list[str]
    weights: str

    def to_dict(self) -> dict[str, object]:
        return {"made_by": self.made_by, "config": self.config, "tokenizer": self.tokenizer,
                "tokenizer_size": self.tokenizer_size, "chat_template": self.chat_template,
                "changed": {k: {"old": c.old, "new": c.new} for k, c in self.changed.items()}, "files": self.files,
                "weights": self.weights}


def make_shape(config_path: Path, tokenizer: Path, out: Path, *, chat_template: Path | None = None, force: bool = False,
               log: Callable[[str], None] = print) -> ShapeRecord:
    """Write the shape folder ``out``; the record (also ``out/specbench_shape.json``)."""
    config = read_json(config_path, "model config")
    for key, kind in (("architectures", list), ("vocab_size", int)):
        if not isinstance(config.get(key), kind) or not config[key]:
            raise SpecbenchError(f"{config_path}: {key}: required (got {config.get(key)!r}); the engine builds the model from it")
    tok = read_tokenizer(tokenizer)
    if chat_template is not None and not chat_template.is_file():
        raise SpecbenchError(f"{chat_template}: chat template not found")
    if tok.chat_template is None and chat_template is None:
        raise SpecbenchError(f"{tokenizer}: no chat template (chat_template.jinja, chat_template.json, or chat_template in "
                             "tokenizer_config.json), and vLLM 0.26 answers every chat request without one with HTTP 400: "
                             "pass --chat-template FILE (a Jinja file, e.g. the model family's chat_template.jinja)")
    check_output(out, force, tokenizer)
    shaped, changed = reconcile(config, tok)
    for key, change in changed.items():
        log(f"{config_path}: {key} {change.old!r} → {change.new!r} (to agree with the tokenizer in {tokenizer}, "
            f"{tok.size} tokens)")
    with config_last(out):
        make_output_dir(out)
        files = copy_tokenizer(tokenizer, out)
        if chat_template is not None:
            write_output(out / "chat_template.jinja", chat_template.read_bytes())
            files = sorted({*files, "chat_template.jinja"})
        record = ShapeRecord(
            made_by=f"specbench {__version__} setup shape", config=str(config_path), tokenizer=str(tokenizer),
            tokenizer_size=tok.size, chat_template=str(chat_template) if chat_template else str(tok.chat_template),
            changed=changed, files=["config.json", *files],
            weights="none: serve with load_format: dummy (random weights from config.json)",
        )
        write_json(out / RECORD, record.to_dict())
        write_json(out / "config.json", shaped)
    return record
