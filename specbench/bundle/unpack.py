"""Unpack a specbench bundle on the offline host, with nothing but its Python (3.8+, standard library).

    python3 unpack.py [--parts DIR] --site DIR [--import MODULE]

Checks every part against manifest.json (size and sha256), streams the joined parts through tar,
checks each wheel's sha256 and unzips it into the site folder (``NAME.data/purelib|platlib`` go to
the top, ``scripts`` to ``bin/``), then prints the ``PYTHONPATH`` line to use. No pip, no venv:
the folder goes in front of the host's site-packages, so a bundled version shadows the host's.
A second run with the same archive returns at once (``.specbench-bundle`` in the site folder).
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
                    help="after unpacking, import MODULE with the site folder on PYTHONPATH (a check)")
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
    for module in args.modules:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([site] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        probe = "import %s as m; print('%s', getattr(m, '__version__', ''), m.__file__)" % (module, module)
        code = subprocess.call([sys.executable, "-c", probe], env=env)
        if code:
            fail("import %s failed with the site folder on PYTHONPATH" % module)
    print("export PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH}" % site)


if __name__ == "__main__":
    main()
