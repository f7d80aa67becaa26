"""safetensors files written and read with numpy alone (no torch): what ``specbench setup drafter``
needs on a machine without a GPU stack.

The format: an 8-byte little-endian header length N, N bytes of JSON
``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}`` (offsets
relative to the end of the header, padded with spaces to 8 bytes), then the tensors' raw
little-endian bytes, back to back in header order. bfloat16 is the top half of float32, rounded to
nearest even; numpy has no bf16, so it is stored as uint16.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SpecbenchError
from .diskio import output_file

ITEM_BYTES = {"BF16": 2, "F16": 2, "F32": 4}
_NUMPY = {"F16": np.float16, "F32": np.float32}
#: a writer never holds more than this many elements of one tensor at once
CHUNK = 1 << 22
MAX_HEADER = 100_000_000  # what the reference reader allows


@dataclass(frozen=True)
class TensorSpec:
    """One tensor to write: its name, shape, and how it is filled (``normal``: N(0, std²), ``ones``, ``zeros``)."""

    name: str
    shape: tuple[int, ...]
    fill: str = "normal"
    std: float = 0.02

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bit patterns (uint16), rounded to nearest, ties to even; NaN stays NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)
    return rounded


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def encode(values: np.ndarray, dtype: str) -> bytes:
    if dtype == "BF16":
        return bf16_bits(values).astype("<u2").tobytes()
    return np.ascontiguousarray(values, dtype=np.dtype(_NUMPY[dtype]).newbyteorder("<")).tobytes()


def header_bytes(tensors: Sequence[tuple[str, str, tuple[int, ...]]], metadata: dict[str, str] | None = None) -> bytes:
    """The length prefix and JSON header for ``(name, dtype, shape)`` in file order."""
    head: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, dtype, shape in tensors:
        size = math.prod(shape) * ITEM_BYTES[dtype]
        head[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(head, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def file_size(specs: Iterable[TensorSpec], dtype: str = "BF16", metadata: dict[str, str] | None = None) -> int:
    specs = list(specs)
    return len(header_bytes([(s.name, dtype, s.shape) for s in specs], metadata)) + sum(s.numel for s in specs) * ITEM_BYTES[dtype]


def _chunks(spec: TensorSpec, rng: np.random.Generator) -> Iterator[np.ndarray]:
    left = spec.numel
    while left:
        n = min(left, CHUNK)
        if spec.fill == "normal":
            yield rng.standard_normal(n, dtype=np.float32) * np.float32(spec.std)
        else:
            yield np.full(n, 1.0 if spec.fill == "ones" else 0.0, dtype=np.float32)
        left -= n


def write_random(path: Path, specs: Sequence[TensorSpec], *, seed: int = 0, dtype: str = "BF16",
                 metadata: dict[str, str] | None = None, progress: Callable[[int], None] | None = None) -> int:
    """Write ``specs`` filled as each says (numpy's PCG64 from ``seed``), a chunk at a time; the bytes
    written. The file appears complete or not at all (written beside, then renamed: ``diskio.output_file``,
    so a full disk is one line naming ``path``)."""
    rng = np.random.default_rng(seed)
    written = 0
    with output_file(path) as tmp, open(tmp, "wb") as out:
        out.write(header_bytes([(s.name, dtype, s.shape) for s in specs], metadata))
        for spec in specs:
            for chunk in _chunks(spec, rng):
                out.write(encode(chunk, dtype))
                written += chunk.size
                if progress:
                    progress(written)
    return path.stat().st_size


@dataclass(frozen=True)
class StoredTensor:
    """One tensor of a safetensors file: its dtype, shape and bytes ``begin``–``end`` after the header."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class Header:
    """A safetensors file's header: its tensors in file order, its ``__metadata__`` (None: none), and the
    byte where the tensors' data starts."""

    tensors: dict[str, StoredTensor]
    metadata: object
    start: int


def read_header(path: Path) -> Header:
    """The JSON header of a safetensors file, checked: every tensor's bytes
    match its dtype and shape, back to back, filling the file exactly. Bad → one-line error."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise SpecbenchError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
        (n,) = struct.unpack("<Q", prefix)
        if n > MAX_HEADER:
            raise SpecbenchError(f"{path}: safetensors header length {n} is implausible")
        raw = f.read(n)
    try:
        head = json.loads(raw)
    except ValueError as err:
        raise SpecbenchError(f"{path}: safetensors header is not JSON ({err})") from None
    if not isinstance(head, dict):
        raise SpecbenchError(f"{path}: safetensors header is not a JSON object")
    start, end = 8 + n, 0
    stored: dict[str, StoredTensor] = {}
    try:
        tensors = sorted(((k, v) for k, v in head.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0])
        for name, t in tensors:
            begin, stop = t["data_offsets"]
            if t["dtype"] not in ITEM_BYTES or begin != end or stop - begin != math.prod(t["shape"]) * ITEM_BYTES[t["dtype"]]:
                raise SpecbenchError(f"{path}: tensor {name!r}: offsets {t['data_offsets']} do not fit {t['dtype']} "
                                     f"{t['shape']} after byte {end}")
            stored[name] = StoredTensor(t["dtype"], tuple(t["shape"]), begin, stop)
            end = stop
    except (KeyError, TypeError, ValueError) as err:
        raise SpecbenchError(f"{path}: safetensors header entry without dtype/shape/data_offsets ({type(err).__name__}: {err})") from None
    if start + end != path.stat().st_size:
        raise SpecbenchError(f"{path}: {path.stat().st_size} bytes, the header describes {start + end}")
    return Header(tensors=stored, metadata=head.get("__metadata__"), start=start)
