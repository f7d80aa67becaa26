"""Unpack a specbench bundle on the offline host, with nothing but its Python (3.8+, standard library).

    python3 unpack.py [--parts DIR] --site DIR [--import MODULE]

Checks every part against manifest.json (size and sha256), streams the joined parts through tar,
checks each wheel's sha256 and unzips it into the site folder (``NAME.data/purelib|platlib`` go to
the top, ``scripts`` to ``bin/``). No pip, no venv: the folder goes in front of the host's
site-packages, so a bundled version shadows the host's. Then, with this Python and the folder on
``PYTHONPATH``, it imports the engine's model path (the manifest's ``imports``: its server module,
transformers' auto classes, each --with package, and every --import): a bundled wheel that a host
package refuses stops it here, one line per module, before it prints the ``PYTHONPATH`` line.
A second run with the same archive skips the unpacking (``.specbench-bundle`` in the site folder)
and checks the imports again.
"""

import argparse
import functools
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile

MARK = ".specbench-bundle"


def fail(msg):
    sys.stderr.write("unpack: " + msg + "\n")
    sys.exit(1)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Joined(object):
    """The parts read back to back as one stream, hashing as it goes."""

    def __init__(self, paths):
        self.paths = list(paths)
        self.f = None
        self.h = hashlib.sha256()

    def read(self, n=-1):
        out = b""
        while n < 0 or len(out) < n:
            if self.f is None:
                if not self.paths:
                    break
                self.f = open(self.paths.pop(0), "rb")
            got = self.f.read(-1 if n < 0 else n - len(out))
            if not got:
                self.f.close()
                self.f = None
                continue
            out += got
        self.h.update(out)
        return out


def check_parts(folder, manifest):
    bad = []
    for part in manifest["parts"]:
        path = os.path.join(folder, part["name"])
        if not os.path.isfile(path):
            bad.append("%s: missing" % part["name"])
        elif os.path.getsize(path) != part["size"]:
            bad.append("%s: %d bytes, manifest says %d" % (part["name"], os.path.getsize(path), part["size"]))
        elif sha256_file(path) != part["sha256"]:
            bad.append("%s: sha256 differs from the manifest" % part["name"])
    if bad:
        fail("%d of %d parts unusable in %s:\n  %s" % (len(bad), len(manifest["parts"]), folder, "\n  ".join(bad)))


def target_of(name):
    """Where a wheel member goes inside the site folder (None: left out)."""
    head, _, rest = name.partition("/")
    if head.endswith(".data") and rest:
        kind, _, sub = rest.partition("/")
        if kind in ("purelib", "platlib"):
            return sub or None
        if kind == "scripts":
            return "bin/" + sub if sub else None
        return None
    return name


def unzip_wheel(path, site):
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            rel = target_of(info.filename)
            if not rel:
                continue
            dest = os.path.normpath(os.path.join(site, rel))
            if not dest.startswith(os.path.normpath(site) + os.sep):
                fail("%s: member %r escapes the site folder" % (os.path.basename(path), info.filename))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            mode = (info.external_attr >> 16) & 0o777
            if mode & 0o111 or rel.startswith("bin/"):
                os.chmod(dest, os.stat(dest).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default=here, help="folder with manifest.json and the parts (default: this script's)")
    ap.add_argument("--site", required=True, help="folder to unzip every wheel into (goes on PYTHONPATH)")
    ap.add_argument("--import", dest="modules", action="append", default=[],
                    help="also import MODULE with the site folder on PYTHONPATH (besides the manifest's imports)")
    args = ap.parse_args(argv)
    mpath = os.path.join(args.parts, "manifest.json")
    if not os.path.isfile(mpath):
        fail("%s: no such file (copy manifest.json next to the parts)" % mpath)
    with open(mpath) as f:
        manifest = json.load(f)
    site = os.path.abspath(args.site)
    mark = os.path.join(site, MARK)
    digest = manifest["archive"]["sha256"]
    if os.path.isfile(mark) and open(mark).read().strip() == digest:
        sys.stderr.write("unpack: %s already holds this bundle\n" % site)
    else:
        check_parts(args.parts, manifest)
        wheels = {w["file"]: w for w in manifest["wheels"]}
        os.makedirs(site, exist_ok=True)
        stream = Joined(os.path.join(args.parts, p["name"]) for p in manifest["parts"])
        seen = 0
        with tempfile.TemporaryDirectory(dir=site, prefix=".unpack-") as tmp:
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    name = os.path.basename(member.name)
                    if not member.isfile() or name not in wheels:
                        fail("archive member %r is not a wheel of the manifest" % member.name)
                    path = os.path.join(tmp, name)
                    src = tar.extractfile(member)
                    h = hashlib.sha256()
                    with open(path, "wb") as out:
                        for block in iter(functools.partial(src.read, 1 << 20), b""):
                            h.update(block)
                            out.write(block)
                    if h.hexdigest() != wheels[name]["sha256"]:
                        fail("%s: sha256 differs from the manifest" % name)
                    unzip_wheel(path, site)
                    os.remove(path)
                    seen += 1
            while stream.read(1 << 20):
                pass
        if stream.h.hexdigest() != digest:
            fail("joined archive: sha256 differs from the manifest")
        if seen != len(wheels):
            fail("archive holds %d wheels, manifest lists %d" % (seen, len(wheels)))
        with open(mark, "w") as f:
            f.write(digest + "\n")
        sys.stderr.write("unpack: %d wheels into %s\n" % (seen, site))
    modules = []
    for module in list(manifest.get("imports") or []) + args.modules:
        if module not in modules:
            modules.append(module)
    if modules:
        check_imports(site, modules)
    print("export PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH}" % site)


# Run by the host's Python with the site folder on PYTHONPATH: one line per module, tab-separated,
# "ok NAME VERSION FILE" or "failed NAME ERROR WHERE" (a submodule of a failed package is not tried).
PROBE = r"""
import importlib, importlib.util, sys
failed = []
for name in sys.argv[1:]:
    if any(name.startswith(f + ".") for f in failed):
        continue
    try:
        m = importlib.import_module(name)
    except BaseException as e:
        failed.append(name)
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        try:
            where = importlib.util.find_spec(name.split(".")[0]).origin
        except BaseException:
            where = ""
        print("failed\t%s\t%s: %s\t%s" % (name, type(e).__name__, lines[0] if lines else "", where or ""))
    else:
        print("ok\t%s\t%s\t%s" % (name, getattr(m, "__version__", ""), getattr(m, "__file__", "") or ""))
    sys.stdout.flush()
"""


def check_imports(site, modules):
    """Import ``modules`` in one child of this Python with the site folder first on PYTHONPATH; the
    bundle is ready only when every one imports (the host's own packages included: they see the
    bundled versions of what they need)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([site] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    sys.stderr.write("unpack: importing %s with the site folder on PYTHONPATH\n" % ", ".join(modules))
    child = subprocess.Popen([sys.executable, "-c", PROBE] + modules, env=env, cwd=site,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    out, err = child.communicate()
    bad, seen = [], 0
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) != 4:
            continue
        seen += 1
        if fields[0] == "ok":
            sys.stderr.write("unpack: import %s: ok %s\n" % (fields[1], " ".join(f for f in fields[2:] if f)))
        else:
            bad.append("import %s: %s%s" % (fields[1], fields[2], " (%s)" % fields[3] if fields[3] else ""))
    if not bad and seen < len(modules):
        tail = [x for x in err.strip().splitlines() if x.strip()][-3:]
        bad.append("the import check died (exit %s): %s" % (child.returncode, " | ".join(tail) or "no output"))
    if bad:
        fail("not ready, %d of %d imports failed with the site folder on PYTHONPATH (a bundled wheel a host "
             "package refuses? see manifest.json host_packages):\n  %s" % (len(bad), len(modules), "\n  ".join(bad)))
    sys.stderr.write("unpack: ready: %d modules import\n" % len(modules))


if __name__ == "__main__":
    main()
