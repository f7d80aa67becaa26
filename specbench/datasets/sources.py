"""Where a set's rows come from: an explicit path, the local data dir, or the Hugging Face hub.

The local copy always wins, so offline runs and CI never touch the network. The hub is tried only
when no local file exists, with short timeouts, and every failure is one ``DatasetError`` line
that says both ways of providing the data.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from ..errors import DatasetError
from .files import Row, one_line, read_rows
from .registry import HubSource
from .spec import DatasetSpec, used_sets

DATA_DIR_ENV = "SPECBENCH_DATA_DIR"
LOCAL_SUFFIXES = (".jsonl", ".parquet")
PROBE_TIMEOUT_S = 5.0
HOW_TO_PROVIDE = (
    f"put the file in the suite's data_dir: (or ${DATA_DIR_ENV}), "
    "or make the Hugging Face hub or a HF cache holding it reachable"
)


def data_root(data_dir: Path | str | None) -> Path | None:
    """The local data dir: the argument, else ``$SPECBENCH_DATA_DIR``, else none."""
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) or None
    return Path(chosen).expanduser() if chosen is not None else None


def local_names(spec: DatasetSpec) -> tuple[str, ...]:
    """The file names looked for in the data dir: each stem with ``.jsonl`` then ``.parquet``, or as it is
    where it names a ``.json`` file (ShareGPT's upstream file)."""
    stems = spec.definition.local(spec.effective_options) if spec.definition.local else ()
    return tuple(n for stem in stems for n in ((stem,) if stem.endswith(".json") else (stem + s for s in LOCAL_SUFFIXES)))


def local_file(spec: DatasetSpec, data_dir: Path | str | None) -> Path | None:
    """The file this spec reads without the network, or None when the hub is the only option."""
    if spec.path is not None:
        return spec.path
    if spec.definition.bundled is not None:
        return spec.definition.bundled
    root = data_root(data_dir)
    if root is None:
        return None
    return next((root / n for n in local_names(spec) if (root / n).is_file()), None)


def hub_source(spec: DatasetSpec) -> HubSource | None:
    return spec.definition.hub(spec.effective_options) if spec.definition.hub else None


def hub_label(source: HubSource) -> str:
    hf_id, config, split = source
    return f"{hf_id}" + (f" ({config})" if config else "") + f" split {split}"


def fetch_rows(spec: DatasetSpec, data_dir: Path | str | None) -> Iterator[Row]:
    """The set's rows in source order, read as they are asked for (``files.read_rows``); the hub's copy
    is loaded (memory-mapped by ``datasets``) before the first one."""
    path = local_file(spec, data_dir)
    if path is not None:
        if not path.is_file():
            raise DatasetError(f"data set '{spec.name}': file not found: {path}")
        return read_rows(path)
    source = hub_source(spec)
    if source is None:
        raise _missing(spec, data_dir, "it has no Hugging Face copy")
    return _hub_rows(spec, data_dir, source)


def _hub_rows(spec: DatasetSpec, data_dir: Path | str | None, source: HubSource) -> Iterator[Row]:
    hf_id, config, split = source
    problem = hub_problem(hf_id)
    if problem:
        raise _missing(spec, data_dir, problem)
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "10")
    import datasets as hf_datasets

    try:
        table = hf_datasets.load_dataset(hf_id, config, split=split)
    except Exception as exc:  # the hub stack raises many unrelated types; all mean "not available"
        raise _missing(spec, data_dir, f"loading {hub_label(source)} from the hub failed ({one_line(exc)})") from exc
    label = hub_label(source)
    return ((f"{label} row {i}", dict(row)) for i, row in enumerate(table))


def check_available(spec: DatasetSpec, data_dir: Path | str | None = None) -> None:
    """Cheap pre-flight check, run before any server starts; raises a one-line ``DatasetError``. A built
    set (or a ``system_tokens`` prompt) checks the sets it reads."""
    for used in used_sets(spec):
        check_available(used, data_dir)
    if spec.definition.generated:
        return
    path = local_file(spec, data_dir)
    if path is not None:
        if not path.is_file():
            raise DatasetError(f"data set '{spec.name}': file not found: {path}")
        return
    source = hub_source(spec)
    if source is None:
        raise _missing(spec, data_dir, "it has no Hugging Face copy")
    problem = hub_problem(source[0])
    if problem:
        raise _missing(spec, data_dir, problem)


def hub_problem(hf_id: str) -> str | None:
    """Why ``load_dataset`` would fail for ``hf_id``, found in milliseconds instead of minutes of retries."""
    if hub_offline():
        return None if hub_cached(hf_id) else f"the hub is offline (HF_HUB_OFFLINE) and no HF cache holds {hf_id}"
    unreachable = probe_hub(hf_id)
    if unreachable is None:
        return None
    hint = "; a HF cache holds it: set HF_HUB_OFFLINE=1 to use it" if hub_cached(hf_id) else ""
    return f"the Hugging Face hub is not reachable ({unreachable}){hint}"


def _missing(spec: DatasetSpec, data_dir: Path | str | None, why: str) -> DatasetError:
    root = data_root(data_dir)
    names = " or ".join(local_names(spec)) or "a local file"
    where = f"in data dir {root}" if root is not None else f"(no data_dir: in the suite and ${DATA_DIR_ENV} unset)"
    how = HOW_TO_PROVIDE if spec.definition.hub else f"put the file in the suite's data_dir: (or ${DATA_DIR_ENV})"
    how += f" {spec.definition.how}" if spec.definition.how else ""
    return DatasetError(f"data set '{spec.name}' is not available: no {names} {where}, and {why}; {how}")


def hub_offline() -> bool:
    flags = (os.environ.get(k, "").strip().lower() for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    return any(flag in ("1", "true", "yes", "on") for flag in flags)


def hub_cached(hf_id: str) -> bool:
    """Whether the hub or datasets cache has a copy, judged from directory names only (no import)."""
    xdg = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache")
    home = Path(os.environ.get("HF_HOME") or xdg / "huggingface").expanduser()
    hub = Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub").expanduser()
    built = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets").expanduser()
    return (hub / f"datasets--{hf_id.replace('/', '--')}").is_dir() or (built / hf_id.replace("/", "___")).is_dir()


def probe_hub(hf_id: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the hub answers for ``hf_id`` (any HTTP status but 404), else why not."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(f"{endpoint}/api/datasets/{hf_id}", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        return f"{endpoint} has no data set {hf_id} (HTTP 404)" if exc.code == 404 else None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"{endpoint}: {one_line(getattr(exc, 'reason', exc))}"
