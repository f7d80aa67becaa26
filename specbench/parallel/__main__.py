"""``python -m specbench.parallel --worker JOBFILE``: one config, started by ``specbench run --parallel``."""

import sys

from .worker import _worker_main

if len(sys.argv) == 3 and sys.argv[1] == "--worker":
    sys.exit(_worker_main(sys.argv[2]))
print("usage: python -m specbench.parallel --worker JOBFILE (internal: started by specbench run --parallel)",
      file=sys.stderr)
sys.exit(2)
