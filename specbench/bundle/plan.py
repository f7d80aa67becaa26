"""What goes into a bundle: the host's packages, the target's markers and tags, and the plan
(bundle, take from the host, or leave out) with the reason for each package."""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import SpecbenchError

FORMAT = "specbench-bundle/1"
# Never bundled: provided by the host's torch stack, or kernels these runs do not use (a
# package reached only through one of these is left out too).
DEFAULT_EXCLUDE = (
    "torch", "torchaudio", "torchvision", "torchcodec", "triton", "nvidia-*", "cuda-*",
    "flashinfer-*", "tilelang", "quack-kernels", "humming-kernels",
    "cutlass-dsl", "nvidia-cutlass-dsl*", "tokenspeed-mla", "pynvvideocodec",
)
# Taken from the host whenever it has them, even against an exact pin: the host's compiled stack
# (torch, pandas, numba) is built for its numpy, and a pinned wheel on PYTHONPATH would shadow it.
DEFAULT_KEEP_HOST = ("numba", "numpy")
PART_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``60M`` → 62914560 (binary units, as ``split -b`` reads them)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, re.I)
    if not m or int(m.group(1)) <= 0:
        raise SpecbenchError(f"--part-size: expected a size like 60M or 1G, got {text!r}")
    return int(m.group(1)) * PART_UNITS[m.group(2).upper()]


def parse_host_packages(text: str, source: str = "host packages") -> dict[str, str | None]:
    """Name → version (None when unknown) from ``pip inspect``, ``pip list`` (columns or json) or ``pip freeze``."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            return {canonicalize_name(i["metadata"]["name"]): str(i["metadata"]["version"]) for i in json.loads(stripped)["installed"]}
        except (ValueError, KeyError, TypeError) as e:
            raise SpecbenchError(f"{source}: not a `pip inspect` report ({type(e).__name__}: {e})") from None
    if stripped.startswith("["):
        try:
            rows = json.loads(stripped)
            return {canonicalize_name(r["name"]): str(r["version"]) for r in rows}
        except (ValueError, KeyError, TypeError) as e:
            raise SpecbenchError(f"{source}: not a `pip list --format=json` list ({e})") from None
    out: dict[str, str | None] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-") or re.fullmatch(r"Package\s+Version(\s+.*)?", line):
            continue
        if m := re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*(\S+)", line):
            name, version = m.groups()
        elif m := re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s+@\s+\S+", line):
            name, version = m.group(1), None
        elif m := re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\s+(\d\S*))?(?:\s+\S.*)?", line):
            name, version = m.groups()
        else:
            raise SpecbenchError(f"{source}:{n}: not a `pip list` / `pip freeze` line: {raw.strip()!r}")
        out[canonicalize_name(name)] = version
    if not out:
        raise SpecbenchError(f"{source}: no packages found (expected `pip list` or `pip freeze` output)")
    return out


def platform_tags(platform: str) -> list[str]:
    """The tags a host of ``platform`` accepts: manylinux_2_28_x86_64 → _2_28 … _2_5 and the legacy aliases."""
    m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if not m:
        return [platform]
    glibc, arch = int(m.group(1)), m.group(2)
    tags = [f"manylinux_2_{v}_{arch}" for v in range(glibc, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags += [f"{name}_{arch}" for v, name in legacy.items() if v <= glibc]
    return tags


def marker_env(python_version: str, platform: str) -> dict[str, str]:
    """Environment-marker values of the target host (pip would use this machine's)."""
    arch = "x86_64"
    if m := re.search(r"(x86_64|aarch64|ppc64le|s390x|i686|armv7l)$", platform):
        arch = m.group(1)
    system = "Linux" if "linux" in platform else ("Darwin" if "macosx" in platform else "Windows")
    return {
        "python_version": ".".join(python_version.split(".")[:2]),
        "python_full_version": python_version if python_version.count(".") == 2 else python_version + ".0",
        "implementation_name": "cpython", "platform_python_implementation": "CPython",
        "implementation_version": python_version, "sys_platform": system.lower() if system != "Windows" else "win32",
        "os_name": "nt" if system == "Windows" else "posix", "platform_system": system,
        "platform_machine": arch, "platform_release": "", "platform_version": "", "extra": "",
    }


def applies(req: Requirement, env: dict[str, str], extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""}) | {""})


def is_excluded(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, canonicalize_name(p) if "*" not in p else p.lower()) for p in patterns)


def host_ok(version: str | None, spec: SpecifierSet) -> bool:
    if version is None:
        return True
    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return spec.contains(Version(v.public), prereleases=True)


@dataclass
class Resolved:
    name: str
    version: str
    requires: list[Requirement]
    url: str | None = None
    sha256: str | None = None


@dataclass
class Plan:
    """What goes into the bundle and why, and what the host provides."""

    bundle: list[Resolved]
    reasons: dict[str, str]
    required_by: dict[str, list[str]]
    host_used: dict[str, dict]
    excluded: list[str]
    conflicts: list[str] = field(default_factory=list)


def plan_bundle(top: list[Requirement], resolved: dict[str, Resolved], host: dict[str, str | None],
                env: dict[str, str], exclude: tuple[str, ...], keep_host: tuple[str, ...],
                reasons: dict[str, str]) -> Plan:
    """Walk the resolved graph from ``top``: excluded names and host packages are leaves.

    A host package is used when its version satisfies every specifier that the resolved graph puts
    on it (unknown versions are assumed to); otherwise the resolved wheel is bundled and shadows it.
    """
    specs: dict[str, SpecifierSet] = {}
    edges: dict[str, list[tuple[Requirement, str]]] = {}

    def walk(skip_host: set[str]) -> dict[str, set[str]]:
        extras: dict[str, set[str]] = {}
        queue = [(r, "(requested)") for r in top]
        while queue:
            req, parent = queue.pop(0)
            name = canonicalize_name(req.name)
            if is_excluded(name, exclude):
                continue
            edges.setdefault(name, []).append((req, parent))
            have = extras.get(name)
            new = set(req.extras)
            if have is not None and new <= have:
                continue
            extras[name] = (have or set()) | new
            if name in skip_host:
                continue
            if name not in resolved:
                raise SpecbenchError(
                    f"resolution: {name} (needed by {parent}) is missing from pip's resolution; "
                    "its markers differ between this Python and the target: pass --resolver-python "
                    "with a Python of the target version")
            for sub in resolved[name].requires:
                if applies(sub, env, extras[name]):
                    queue.append((sub, name))
        return extras

    walk(set())
    for name, reqs in edges.items():
        s = SpecifierSet()
        for req, _ in reqs:
            s &= req.specifier
        specs[name] = s
    top_names = {canonicalize_name(r.name) for r in top if reasons.get(canonicalize_name(r.name)) in ("engine", "with")}
    on_host: dict[str, dict[str, Any]] = {}
    conflicts: list[str] = []
    for name in edges:
        if name in top_names or name not in host:
            continue
        if host_ok(host[name], specs[name]):
            on_host[name] = {"host_version": host[name], "required": str(specs[name]) or "any"}
        elif name in keep_host:
            on_host[name] = {"host_version": host[name], "required": str(specs[name]), "kept_against_pin": True}
            conflicts.append(f"{name}: host has {host[name]}, the graph asks {specs[name]}; kept the host's (--keep-host)")
    edges.clear()
    extras = walk(set(on_host))
    required_by = {n: sorted({p for _, p in edges[n]}) for n in extras}
    bundle = [resolved[n] for n in extras if n not in on_host]
    used = {n: on_host[n] for n in sorted(on_host) if n in extras}
    excl: list[str] = sorted({canonicalize_name(s.name) for r in resolved.values() for s in r.requires
                   if is_excluded(canonicalize_name(s.name), exclude) and applies(s, env, set())} |
                  {canonicalize_name(r.name) for r in top if is_excluded(canonicalize_name(r.name), exclude)})
    for res in bundle:
        reasons.setdefault(res.name, "dependency")
    return Plan(bundle, {n.name: reasons[n.name] for n in bundle}, required_by, used, excl, conflicts)
