"""pip as the resolver and downloader for a target Python and platform (metadata and wheels only)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..errors import SpecbenchError
from .hostreqs import parsed_requirements
from .plan import Resolved, platform_tags


def run_pip(python: str, args: list[str], what: str) -> None:
    code, tail = pip_output(python, args)
    if code != 0:
        raise SpecbenchError(f"bundle: {what} failed (pip exit {code})\n{tail}")


def pip_output(python: str, args: list[str]) -> tuple[int, str]:
    """pip's exit code and the last 3000 characters it said (index-location warnings left out)."""
    done = subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True)
    tail = "\n".join(line for line in (done.stdout + done.stderr).strip().splitlines()
                     if not line.startswith("WARNING: Location"))[-3000:]
    return done.returncode, tail


def target_args(python_version: str, platform: str) -> list[str]:
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
            *target_args(python_version, platform), *index_args]
    if constraints:
        cfile = work / "constraints.txt"
        cfile.write_text("\n".join(constraints) + "\n")
        args += ["-c", str(cfile)]
    run_pip(python, args + requirements, "resolving " + " ".join(requirements))
    return read_report(report)


def read_report(report: Path) -> dict[str, Resolved]:
    """The packages of a ``pip install --report`` file with their requirements, URL and sha256."""
    out: dict[str, Resolved] = {}
    for item in json.loads(report.read_text())["install"]:
        meta = item["metadata"]
        reqs = parsed_requirements(meta.get("requires_dist") or [])
        info = item.get("download_info") or {}
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        name = canonicalize_name(meta["name"])
        out[name] = Resolved(name, meta["version"], reqs, info.get("url"), hashes.get("sha256"))
    return out


def requires_of(pins: dict[str, str], python: str, python_version: str, platform: str, index_args: list[str],
                work: Path) -> tuple[dict[str, list[Requirement]], dict[str, str]]:
    """The ``Requires-Dist`` of exact versions (name → version) from the index, metadata only, and why
    each one that could not be read was not (a version the index lacks is named by pip and dropped)."""
    report, left = work / "host-report.json", dict(pins)
    unknown: dict[str, str] = {}
    while left:
        args = ["install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet", "--report", str(report),
                "--target", str(work / "never-written"), *target_args(python_version, platform), *index_args]
        code, tail = pip_output(python, args + [f"{n}=={v}" for n, v in left.items()])
        if code == 0:
            return {name: r.requires for name, r in read_report(report).items()}, unknown
        named = {canonicalize_name(m) for m in re.findall(r"(?:No matching distribution found for|satisfies the requirement) "
                                                              r"([A-Za-z0-9][A-Za-z0-9._-]*)", tail)} & set(left)
        last = (tail.strip().splitlines() or ["no output"])[-1]
        for name in named or list(left):
            unknown[name] = f"{name}=={left.pop(name)}: {'not on the index for this target' if named else 'pip: ' + last}"
    return {}, unknown


def wheel_name_version(path: Path) -> tuple[str, str]:
    parts = path.name[:-4].split("-")
    if not path.name.endswith(".whl") or len(parts) < 5:
        raise SpecbenchError(f"{path}: not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)")
    return canonicalize_name(parts[0]), parts[1]


def local_wheel(spec: str, work: Path) -> Path | None:
    """``--with`` a wheel file, a project directory, or ``specbench`` (this harness's own source)."""
    path = Path(spec).expanduser()
    if spec == "specbench":
        root = Path(__file__).resolve().parents[2]
        if not (root / "pyproject.toml").exists():
            return None
        path = root
    if path.suffix == ".whl" and path.is_file():
        return path
    if path.is_dir() and ((path / "pyproject.toml").exists() or (path / "setup.py").exists()):
        dest = work / "built"
        dest.mkdir(exist_ok=True)
        run_pip(sys.executable, ["wheel", "--no-deps", "-q", "-w", str(dest), str(path)], f"building a wheel of {path}")
        built = sorted(dest.glob("*.whl"), key=lambda p: p.stat().st_mtime)
        return built[-1]
    return None


def req_text(r: Requirement) -> str:
    """The requirement without its marker (already evaluated for the target)."""
    extras = f"[{','.join(sorted(r.extras))}]" if r.extras else ""
    return f"{r.name}{extras}{r.specifier}" if not r.url else f"{r.name}{extras} @ {r.url}"


def wheel_requires(path: Path) -> list[Requirement]:
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


def download(python: str, reqs: list[str], python_version: str, platform: str, index_args, dest: Path,
              what: str, no_deps: bool = True) -> list[Path]:
    before = set(dest.glob("*.whl"))
    args = ["download", "--quiet", "-d", str(dest), *target_args(python_version, platform), *index_args]
    if no_deps:
        args.append("--no-deps")
    run_pip(python, args + reqs, f"downloading {what}")
    return sorted(set(dest.glob("*.whl")) - before) or sorted(before)


def resolver_for(python_version: str) -> str:
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


def wheel_modules(path: Path) -> list[str]:
    """The top-level modules a wheel installs (its ``top_level.txt``, else its top folders and ``.py`` files)."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        top = next((n for n in names if n.endswith(".dist-info/top_level.txt") and n.count("/") == 1), None)
        if top is not None:
            listed = [m.strip() for m in z.read(top).decode("utf-8", "replace").splitlines()]
            return sorted({m for m in listed if m and "/" not in m})
    found = set()
    for name in names:
        head, sep, rest = name.partition("/")
        if head.endswith((".dist-info", ".data")):
            continue
        if sep and rest == "__init__.py":
            found.add(head)
        elif not sep and head.endswith(".py"):
            found.add(head[:-3])
    return sorted(found)
