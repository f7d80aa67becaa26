"""``specbench setup bundle``: an engine and what it needs, packed for an offline GPU host.

Air-gapped GPU hosts usually have Python, torch and the CUDA libraries but no engine and no
network. This resolves the engine's requirements for the host's Python and platform with pip
(metadata only), leaves out what the host already has in a compatible version (its ``pip list``)
and what the run does not need (``--exclude``: kernels packages, torch and the CUDA wheels the
host ships), downloads the rest as wheels and writes one archive split into parts of a chosen
size, a manifest with the sha256 of every part and wheel, and ``unpack.py``, which needs only the
host's Python: it checks and joins the parts and unzips every wheel into one folder meant for
``PYTHONPATH`` (no pip, no venv).
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .errors import SpecbenchError

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
UNPACK_TEMPLATE = Path(__file__).with_name("bundle_unpack.py")
PART_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``60M`` → 62914560 (binary units, as ``split -b`` reads them)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, re.I)
    if not m or int(m.group(1)) <= 0:
        raise SpecbenchError(f"--part-size: expected a size like 60M or 1G, got {text!r}")
    return int(m.group(1)) * PART_UNITS[m.group(2).upper()]


def parse_host_packages(text: str, source: str = "host packages") -> dict[str, str | None]:
    """Name → version (None when unknown) from ``pip list`` (columns or json) or ``pip freeze``."""
    stripped = text.strip()
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


def _applies(req: Requirement, env: dict[str, str], extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""}) | {""})


def _excluded(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, canonicalize_name(p) if "*" not in p else p.lower()) for p in patterns)


def _host_ok(version: str | None, spec: SpecifierSet) -> bool:
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
            if _excluded(name, exclude):
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
                if _applies(sub, env, extras[name]):
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
        if _host_ok(host[name], specs[name]):
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
                   if _excluded(canonicalize_name(s.name), exclude) and _applies(s, env, set())} |
                  {canonicalize_name(r.name) for r in top if _excluded(canonicalize_name(r.name), exclude)})
    for res in bundle:
        reasons.setdefault(res.name, "dependency")
    return Plan(bundle, {n.name: reasons[n.name] for n in bundle}, required_by, used, excl, conflicts)


def _pip(python: str, args: list[str], what: str) -> None:
    done = subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(line for line in (done.stdout + done.stderr).strip().splitlines()
                         if not line.startswith("WARNING: Location"))[-3000:]
        raise SpecbenchError(f"bundle: {what} failed (pip exit {done.returncode})\n{tail}")


def _target_args(python_version: str, platform: str) -> list[str]:
    args = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for tag in platform_tags(platform):
        args += ["--platform", tag]
    return args


def resolve(requirements: list[str], python: str, python_version: str, platform: str,
            index_args: list[str], constraints: list[str], work: Path) -> dict[str, Resolved]:
    """pip's own resolution for the target (``install --dry-run --ignore-installed --report``)."""
    report = work / "report.json"
    args = ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
            "--target", str(work / "never-written"),
            *_target_args(python_version, platform), *index_args]
    if constraints:
        cfile = work / "constraints.txt"
        cfile.write_text("\n".join(constraints) + "\n")
        args += ["-c", str(cfile)]
    _pip(python, args + requirements, "resolving " + " ".join(requirements))
    out: dict[str, Resolved] = {}
    for item in json.loads(report.read_text())["install"]:
        meta = item["metadata"]
        reqs = []
        for text in meta.get("requires_dist") or []:
            try:
                reqs.append(Requirement(text))
            except InvalidRequirement:
                continue
        info = item.get("download_info") or {}
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        name = canonicalize_name(meta["name"])
        out[name] = Resolved(name, meta["version"], reqs, info.get("url"), hashes.get("sha256"))
    return out


def _wheel_name_version(path: Path) -> tuple[str, str]:
    parts = path.name[:-4].split("-")
    if not path.name.endswith(".whl") or len(parts) < 5:
        raise SpecbenchError(f"{path}: not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)")
    return canonicalize_name(parts[0]), parts[1]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class _PartWriter(io.RawIOBase):
    """A write-only stream that cuts what it gets into ``bundle.tar.partNNN`` files of ``size`` bytes."""

    parts: list[dict[str, Any]]
    _f: IO[bytes] | None
    _h: hashlib._Hash | None

    def __init__(self, out: Path, size: int):
        self.out, self.size, self.parts = out, size, []
        self.total = hashlib.sha256()
        self._f = None
        self._h = None
        self._n = 0

    def writable(self) -> bool:
        return True

    def _next(self) -> None:
        self._close_part()
        name = f"bundle.tar.part{len(self.parts):03d}"
        self._f, self._h, self._n = open(self.out / name, "wb"), hashlib.sha256(), 0
        self.parts.append({"name": name})

    def _close_part(self) -> None:
        if self._f is not None:
            assert self._h is not None  # opened together with _f in _next
            self._f.close()
            self.parts[-1].update(size=self._n, sha256=self._h.hexdigest())
            self._f = None

    def write(self, b) -> int:
        data = memoryview(b).cast("B")
        self.total.update(data)
        done = 0
        while done < len(data):
            if self._f is None or self._n >= self.size:
                self._next()
            assert self._f is not None and self._h is not None  # _next opened both
            take = min(len(data) - done, self.size - self._n)
            chunk = data[done:done + take]
            self._f.write(chunk)
            self._h.update(chunk)
            self._n += take
            done += take
        return len(data)

    def close(self) -> None:
        self._close_part()
        super().close()


def write_archive(wheels: list[Path], out: Path, part_size: int) -> tuple[list[dict], str, int]:
    """One deterministic tar of ``wheels/<file>`` in the given order (no mtimes, owners), split into parts.

    Deterministic so that a re-run with a corrected host list rewrites only the parts after the
    first changed wheel (put the big, stable wheels first).
    """
    writer = _PartWriter(out, part_size)
    total = 0
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for path in wheels:
            info = tarfile.TarInfo("wheels/" + path.name)
            info.size, info.mtime, info.mode = path.stat().st_size, 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path, "rb") as f:
                tar.addfile(info, f)
            total += info.size
    writer.close()
    return writer.parts, writer.total.hexdigest(), total


def _local_wheel(spec: str, work: Path) -> Path | None:
    """``--with`` a wheel file, a project directory, or ``specbench`` (this harness's own source)."""
    path = Path(spec).expanduser()
    if spec == "specbench":
        root = Path(__file__).resolve().parents[1]
        if not (root / "pyproject.toml").exists():
            return None
        path = root
    if path.suffix == ".whl" and path.is_file():
        return path
    if path.is_dir() and ((path / "pyproject.toml").exists() or (path / "setup.py").exists()):
        dest = work / "built"
        dest.mkdir(exist_ok=True)
        _pip(sys.executable, ["wheel", "--no-deps", "-q", "-w", str(dest), str(path)], f"building a wheel of {path}")
        built = sorted(dest.glob("*.whl"), key=lambda p: p.stat().st_mtime)
        return built[-1]
    return None


def build_bundle(engine: str, host_file: Path | None, out: Path, *, python_version: str = "3.12",
                 platform: str = "manylinux_2_28_x86_64", part_size: int = 60 << 20,
                 extra: Sequence[str] = (), only: Sequence[str] = (), exclude: tuple[str, ...] = DEFAULT_EXCLUDE,
                 keep_host: tuple[str, ...] = DEFAULT_KEEP_HOST, index_args: Sequence[str] = (),
                 resolver_python: str | None = None, log=print) -> dict:
    """Resolve, download and pack; returns the manifest (also written to ``out/manifest.json``)."""
    try:
        engine_req = Requirement(engine)
    except InvalidRequirement as e:
        raise SpecbenchError(f"--engine: not a requirement like vllm==0.26.0: {engine!r} ({e})") from None
    host: dict[str, str | None] = {}
    if host_file is not None:
        if not host_file.is_file():
            raise SpecbenchError(f"--host-packages: {host_file}: no such file")
        host = parse_host_packages(host_file.read_text(), str(host_file))
    python = resolver_python or _resolver_for(python_version)
    env = marker_env(python_version, platform)
    exclude = tuple(canonicalize_name(p) if "*" not in p else p.lower() for p in exclude)
    keep_host = tuple(canonicalize_name(p) for p in keep_host)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("bundle.tar.part*"):
        old.unlink()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specbench-bundle-") as tmp:
        work = Path(tmp)
        dl = work / "wheels"
        dl.mkdir()
        reasons: dict[str, str] = {canonicalize_name(engine_req.name): "engine"}
        top = [engine_req]
        local: dict[str, Path] = {}
        for spec in extra:
            wheel = _local_wheel(spec, work)
            if wheel is not None:
                name, _ = _wheel_name_version(wheel)
                local[name] = wheel
                top.append(Requirement(f"{name} @ {wheel.resolve().as_uri()}"))
            else:
                try:
                    top.append(Requirement(spec))
                except InvalidRequirement:
                    raise SpecbenchError(f"--with: {spec!r} is neither a requirement, a .whl file nor a project directory") from None
            reasons[canonicalize_name(top[-1].name)] = "with"
        # The engine's own deps minus the excluded ones, resolved with its pins on excluded ones as
        # constraints: pip then never needs the excluded packages' wheels, only their metadata.
        engine_files = _download(python, [str(engine_req)], python_version, platform, index_args, dl, "the engine")
        engine_wheel = engine_files[0]
        engine_meta = _wheel_requires(engine_wheel)
        engine_reqs = [r for r in engine_meta if _applies(r, env, set(engine_req.extras))]
        kept = [r for r in engine_reqs if not _excluded(canonicalize_name(r.name), exclude)]
        constraints = [f"{r.name}{r.specifier}" for r in engine_reqs
                       if _excluded(canonicalize_name(r.name), exclude) and str(r.specifier).startswith("==")]
        as_text = [_req_text(r) for r in kept] + [str(Path(local[canonicalize_name(r.name)])) if canonicalize_name(r.name) in local
                                                   else str(r) for r in top[1:]]
        log(f"resolving {len(kept)} requirements of {engine_wheel.name} (+{len(top) - 1} --with) for "
            f"Python {python_version} / {platform} with {python}")
        resolved = resolve(as_text, python, python_version, platform, list(index_args), constraints, work)
        ename = canonicalize_name(engine_req.name)
        resolved[ename] = Resolved(ename, _wheel_name_version(engine_wheel)[1], engine_meta)
        plan = plan_bundle(top, resolved, host, env, exclude, keep_host, reasons)
        names = [r for r in plan.bundle if r.name != ename and r.name not in local]
        files: dict[str, Path] = {ename: engine_wheel, **local}
        if names:
            log(f"downloading {len(names)} wheels the host lacks")
            got = _download(python, [f"{r.name}=={r.version}" for r in names], python_version, platform,
                            index_args, dl, "the wheels", no_deps=True)
            for path in got:
                files.setdefault(_wheel_name_version(path)[0], path)
        for spec in only:
            got = [Path(spec)] if spec.endswith(".whl") and Path(spec).is_file() else \
                _download(python, [spec], python_version, platform, index_args, dl, spec, no_deps=True)
            name, version = _wheel_name_version(got[0])
            files[name] = got[0]
            by_only = Resolved(name, version, [])
            plan.bundle.append(by_only)
            plan.reasons[name] = "with-only"
        wheels, entries = [], []
        only_names = [r.name for r in plan.bundle if plan.reasons.get(r.name) == "with-only"]
        order = [ename] + only_names + [n for n in local] + sorted(r.name for r in names)
        by_name = {r.name: r for r in plan.bundle}
        for name in order:
            if name not in files:
                raise SpecbenchError(f"bundle: pip downloaded no wheel for {name}=={by_name[name].version}")
            path = files[name]
            digest = _sha256(path)
            want = by_name[name].sha256
            if want and want != digest:
                raise SpecbenchError(f"bundle: {path.name}: sha256 {digest} differs from the index's {want}")
            wheels.append(path)
            entries.append({"file": path.name, "name": name, "version": _wheel_name_version(path)[1],
                            "size": path.stat().st_size, "sha256": digest, "reason": plan.reasons.get(name, "dependency"),
                            "required_by": plan.required_by.get(name, [])})
        parts, total_sha, total = write_archive(wheels, out, part_size)
    manifest = {
        "format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "engine": str(engine_req), "python_version": python_version, "platform": platform,
        "part_size": part_size, "parts": parts,
        "archive": {"name": "bundle.tar", "size": sum(p["size"] for p in parts), "sha256": total_sha},
        "wheels": entries, "wheel_bytes": total,
        "host_packages": {"file": str(host_file) if host_file else None, "used": plan.host_used},
        "excluded": {"patterns": list(exclude), "left_out": plan.excluded},
        "conflicts": plan.conflicts,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.copyfile(UNPACK_TEMPLATE, out / "unpack.py")
    log(f"{len(entries)} wheels, {total / 1e6:.1f} MB in {len(parts)} parts of ≤ {part_size / (1 << 20):g} MiB "
        f"→ {out} ({time.monotonic() - t0:.0f} s); host provides {len(plan.host_used)}, excluded {len(plan.excluded)}")
    for line in plan.conflicts:
        log("warning: " + line)
    return manifest


def _req_text(r: Requirement) -> str:
    """The requirement without its marker (already evaluated for the target)."""
    extras = f"[{','.join(sorted(r.extras))}]" if r.extras else ""
    return f"{r.name}{extras}{r.specifier}" if not r.url else f"{r.name}{extras} @ {r.url}"


def _wheel_requires(path: Path) -> list[Requirement]:
    with zipfile.ZipFile(path) as z:
        meta = next((n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
        if meta is None:
            raise SpecbenchError(f"{path}: no .dist-info/METADATA")
        text = z.read(meta).decode("utf-8", "replace")
    reqs = []
    for line in text.split("\n\n", 1)[0].splitlines():
        if line.startswith("Requires-Dist:"):
            reqs.append(Requirement(line.split(":", 1)[1].strip()))
    return reqs


def _download(python: str, reqs: list[str], python_version: str, platform: str, index_args, dest: Path,
              what: str, no_deps: bool = True) -> list[Path]:
    before = set(dest.glob("*.whl"))
    args = ["download", "--quiet", "-d", str(dest), *_target_args(python_version, platform), *index_args]
    if no_deps:
        args.append("--no-deps")
    _pip(python, args + reqs, f"downloading {what}")
    return sorted(set(dest.glob("*.whl")) - before) or sorted(before)


def _resolver_for(python_version: str) -> str:
    """A Python of the target's minor version (pip evaluates markers such as python_version with its own)."""
    want = ".".join(python_version.split(".")[:2])
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == want:
        return sys.executable
    cands = [shutil.which(f"python{want}")] + [str(p) for p in sorted(Path.home().glob(f".pyenv/versions/{want}*/bin/python{want}"))]
    for cand in cands:
        if cand and subprocess.run([cand, "-c", "import pip"], capture_output=True).returncode == 0:
            return cand
    raise SpecbenchError(f"bundle: no Python {want} with pip found here to resolve for the target; "
                         "pass --resolver-python PATH")


def bundle_cli(args) -> int:
    index_args: list[str] = []
    for d in args.find_links or []:
        index_args += ["--find-links", d]
    if args.no_index:
        index_args.append("--no-index")
    exclude = tuple(() if args.no_default_excludes else DEFAULT_EXCLUDE) + tuple(args.exclude or ())
    keep = tuple(DEFAULT_KEEP_HOST) + tuple(args.keep_host or ())
    if not args.engine or not args.output:
        raise SpecbenchError("setup bundle: --engine and -o/--output are required")
    build_bundle(args.engine, Path(args.host_packages) if args.host_packages else None, Path(args.output),
                 python_version=args.python_version, platform=args.platform, part_size=parse_size(args.part_size),
                 extra=args.with_ or [], only=args.with_only or [], exclude=exclude, keep_host=keep, index_args=index_args,
                 resolver_python=args.resolver_python, log=lambda s: print(s, file=sys.stderr))
    print(f"next: copy {args.output}/ to the host, then there: python3 {args.output}/unpack.py --site DIR")
    return 0


def add_arguments(p) -> None:
    """The ``setup bundle`` options (on the ``setup`` subparser)."""
    p.add_argument("--engine", help="bundle: the engine requirement, e.g. vllm==0.26.0")
    p.add_argument("--host-packages", metavar="FILE", help="bundle: the host's `pip list` / `pip freeze` output; "
                   "what it has (compatible) is left out")
    p.add_argument("--python-version", default="3.12", help="bundle: the host's Python (default 3.12)")
    p.add_argument("--platform", default="manylinux_2_28_x86_64", help="bundle: the host's wheel platform (default manylinux_2_28_x86_64)")
    p.add_argument("--part-size", default="60M", help="bundle: size of each archive part (default 60M)")
    p.add_argument("--with", dest="with_", action="append", metavar="REQ|WHEEL|DIR",
                   help="bundle: also pack this (and its deps the host lacks); `specbench` = this harness")
    p.add_argument("--with-only", action="append", metavar="REQ|WHEEL",
                   help="bundle: also pack this one wheel without its deps (e.g. a model shipped as a wheel)")
    p.add_argument("--exclude", action="append", metavar="NAME", help="bundle: never pack NAME (glob; adds to the defaults)")
    p.add_argument("--no-default-excludes", action="store_true", help="bundle: drop the default excludes (" + ", ".join(DEFAULT_EXCLUDE) + ")")
    p.add_argument("--keep-host", action="append", metavar="NAME", help="bundle: use the host's NAME even against a pin (default: numba, numpy)")
    p.add_argument("--find-links", action="append", metavar="DIR", help="bundle: extra wheel folder for pip")
    p.add_argument("--no-index", action="store_true", help="bundle: only --find-links, no index")
    p.add_argument("--resolver-python", metavar="PATH", help="bundle: a Python of the target version to run pip with (default: found)")
    p.add_argument("--output", "-o", help="bundle: output folder")
