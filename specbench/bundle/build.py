"""``build_bundle``: resolve, plan, download, check and pack; writes the manifest and ``unpack.py``."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..errors import SpecbenchError
from ..util.diskio import make_output_dir, output_errors, output_file, write_output
from .archive import sha256_of, write_archive
from .hostreqs import fit_host, inspect_requires
from .pip import download, local_wheel, req_text, requires_of, resolve, resolver_for, wheel_modules, wheel_name_version, wheel_requires
from .plan import DEFAULT_EXCLUDE, DEFAULT_KEEP_HOST, FORMAT, Plan, Resolved, applies, is_excluded, marker_env, parse_host_packages, plan_bundle

UNPACK_TEMPLATE = Path(__file__).with_name("unpack.py")
# What unpack.py imports before it says ready (manifest ``imports``): the engine's server module (the
# launchers' command) and transformers' auto classes (convert_gguf, every engine's model loading),
# then each --with package. ``import vllm`` alone imports neither transformers nor huggingface-hub.
ENGINE_MODULES = {"vllm": ("vllm", "vllm.entrypoints.openai.api_server"), "sglang": ("sglang", "sglang.launch_server")}
MODEL_PATH = ("transformers", "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto")


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
    listed: dict[str, list[Requirement]] | None = None
    if host_file is not None:
        if not host_file.is_file():
            raise SpecbenchError(f"--host-packages: {host_file}: no such file")
        text = host_file.read_text()
        host = parse_host_packages(text, str(host_file))
        listed = inspect_requires(text, str(host_file))
    python = resolver_python or resolver_for(python_version)
    env = marker_env(python_version, platform)
    exclude = tuple(canonicalize_name(p) if "*" not in p else p.lower() for p in exclude)
    keep_host = tuple(canonicalize_name(p) for p in keep_host)
    make_output_dir(out)
    with output_errors(out, "directory"):  # the folder reads as a bundle only once manifest.json is written, last
        (out / "manifest.json").unlink(missing_ok=True)
        for old in out.glob("bundle.tar.part*"):
            old.unlink()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specbench-bundle-") as tmp:
        work = Path(tmp)
        dl = work / "wheels"
        dl.mkdir()
        top, local, reasons = _top_requirements(engine_req, extra, work)
        # The engine's own deps minus the excluded ones, resolved with its pins on excluded ones as
        # constraints: pip then never needs the excluded packages' wheels, only their metadata.
        engine_files = download(python, [str(engine_req)], python_version, platform, index_args, dl, "the engine")
        engine_wheel = engine_files[0]
        engine_meta = wheel_requires(engine_wheel)
        engine_reqs = [r for r in engine_meta if applies(r, env, set(engine_req.extras))]
        kept = [r for r in engine_reqs if not is_excluded(canonicalize_name(r.name), exclude)]
        constraints = [f"{r.name}{r.specifier}" for r in engine_reqs
                       if is_excluded(canonicalize_name(r.name), exclude) and str(r.specifier).startswith("==")]
        as_text = [req_text(r) for r in kept] + [str(Path(local[canonicalize_name(r.name)])) if canonicalize_name(r.name) in local
                                                   else str(r) for r in top[1:]]
        log(f"resolving {len(kept)} requirements of {engine_wheel.name} (+{len(top) - 1} --with) for "
            f"Python {python_version} / {platform} with {python}")
        ename = canonicalize_name(engine_req.name)
        engine_res = Resolved(ename, wheel_name_version(engine_wheel)[1], engine_meta)

        def plan_with(honour: list[str], shadow: set[str]) -> Plan:
            resolved = resolve(as_text, python, python_version, platform, list(index_args), constraints + honour, work)
            usable = {n: v for n, v in host.items() if n not in shadow}
            return plan_bundle(top, {**resolved, ename: engine_res}, usable, env, exclude, keep_host, reasons)

        def read_requires(pins: dict[str, str]) -> tuple[dict[str, list[Requirement]], dict[str, str]]:
            log(f"reading the requirements of {len(pins)} host packages from the index")
            return requires_of(pins, python, python_version, platform, list(index_args), work)

        fit = fit_host(plan_with, read_requires, host, listed, env, exclude, log)
        plan = fit.plan
        names = [r for r in plan.bundle if r.name != ename and r.name not in local]
        files: dict[str, Path] = {ename: engine_wheel, **local}
        if names:
            log(f"downloading {len(names)} wheels the host lacks")
            got = download(python, [f"{r.name}=={r.version}" for r in names], python_version, platform,
                            index_args, dl, "the wheels", no_deps=True)
            for path in got:
                files.setdefault(wheel_name_version(path)[0], path)
        for spec in only:
            got = [Path(spec)] if spec.endswith(".whl") and Path(spec).is_file() else \
                download(python, [spec], python_version, platform, index_args, dl, spec, no_deps=True)
            name, version = wheel_name_version(got[0])
            files[name] = got[0]
            by_only = Resolved(name, version, [])
            plan.bundle.append(by_only)
            plan.reasons[name] = "with-only"
        only_names = [r.name for r in plan.bundle if plan.reasons.get(r.name) == "with-only"]
        order = [ename] + only_names + [n for n in local] + sorted(r.name for r in names)
        wheels, entries = _checked_wheels(order, files, plan)
        imports = list(ENGINE_MODULES.get(ename) or wheel_modules(engine_wheel))
        imports += MODEL_PATH if "transformers" in plan.required_by else ()
        imports += [m for n in order if plan.reasons.get(n) == "with" for m in wheel_modules(files[n]) if m not in imports]
        with output_errors(out / "bundle.tar"):
            parts, total_sha, total = write_archive(wheels, out, part_size)
    manifest = {
        "format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "engine": str(engine_req), "python_version": python_version, "platform": platform,
        "part_size": part_size, "parts": parts,
        "archive": {"name": "bundle.tar", "size": sum(p["size"] for p in parts), "sha256": total_sha},
        "wheels": entries, "wheel_bytes": total,
        "host_packages": {"file": str(host_file) if host_file else None, "used": plan.host_used,
                          "requirements_from": None if host_file is None else "pip inspect" if listed is not None else "index",
                          "honoured": fit.honoured, "requirements_unknown": fit.unknown},
        "imports": imports,
        "excluded": {"patterns": list(exclude), "left_out": plan.excluded},
        "conflicts": plan.conflicts + fit.conflicts,
    }
    with output_file(out / "unpack.py") as dest:
        shutil.copyfile(UNPACK_TEMPLATE, dest)
    write_output(out / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    log(f"{len(entries)} wheels, {total / 1e6:.1f} MB in {len(parts)} parts of ≤ {part_size / (1 << 20):g} MiB "
        f"→ {out} ({time.monotonic() - t0:.0f} s); host provides {len(plan.host_used)}, excluded {len(plan.excluded)}")
    for line in plan.conflicts + fit.conflicts:
        log("warning: " + line)
    for line in fit.unknown.values():
        log(f"warning: requirements of the host's {line}; what is packed is not checked against them (a `pip inspect` list carries them)")
    return manifest


def _top_requirements(engine_req: Requirement, extra: Sequence[str], work: Path) -> tuple[list[Requirement], dict[str, Path], dict[str, str]]:
    """The engine and each ``--with`` (a requirement, or a local wheel/project built here), the local
    wheels by name, and why each top-level package is in."""
    reasons: dict[str, str] = {canonicalize_name(engine_req.name): "engine"}
    top = [engine_req]
    local: dict[str, Path] = {}
    for spec in extra:
        wheel = local_wheel(spec, work)
        if wheel is not None:
            name, _ = wheel_name_version(wheel)
            local[name] = wheel
            top.append(Requirement(f"{name} @ {wheel.resolve().as_uri()}"))
        else:
            try:
                top.append(Requirement(spec))
            except InvalidRequirement:
                raise SpecbenchError(f"--with: {spec!r} is neither a requirement, a .whl file nor a project directory") from None
        reasons[canonicalize_name(top[-1].name)] = "with"
    return top, local, reasons


def _checked_wheels(order: list[str], files: dict[str, Path], plan: Plan) -> tuple[list[Path], list[dict]]:
    """The wheels in archive order with their manifest entries; a missing wheel or a sha256 that
    differs from the index's stops the bundle."""
    wheels, entries = [], []
    by_name = {r.name: r for r in plan.bundle}
    for name in order:
        if name not in files:
            raise SpecbenchError(f"bundle: pip downloaded no wheel for {name}=={by_name[name].version}")
        path = files[name]
        digest = sha256_of(path)
        want = by_name[name].sha256
        if want and want != digest:
            raise SpecbenchError(f"bundle: {path.name}: sha256 {digest} differs from the index's {want}")
        wheels.append(path)
        entries.append({"file": path.name, "name": name, "version": wheel_name_version(path)[1],
                        "size": path.stat().st_size, "sha256": digest, "reason": plan.reasons.get(name, "dependency"),
                        "required_by": plan.required_by.get(name, [])})
    return wheels, entries
