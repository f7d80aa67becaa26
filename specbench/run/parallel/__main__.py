"""``python -m specbench.run.parallel --worker JOBFILE``: one config, started by ``specbench run --parallel``."""

import sys

from .worker import worker_main

if len(sys.argv) == 3 and sys.argv[1] == "--worker":
    sys.exit(worker_main(sys.argv[2]))
print("usage: python -m specbench.run.parallel --worker JOBFILE (internal: started by specbench run --parallel)",
      file=sys.stderr)
sys.exit(2)
