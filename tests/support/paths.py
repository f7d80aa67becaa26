"""Where the tests find the checkout, their data and the scripts they start as servers."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
# trimmed copies of committed runs, one folder per what they test (never results/evidence: docs/developing.md)
RUNS = DATA / "runs"
SHARED = Path(os.environ.get("SPECBENCH_SHARED", ROOT.parent / "shared"))
SCRIPTED = ROOT / "tests" / "support" / "scripted_server.py"
SUPPORT = ROOT / "tests" / "support"
# a started script that imports tests.support finds the package through this, not through sys.path edits
PACKAGE_ENV = {"PYTHONPATH": str(ROOT)}
