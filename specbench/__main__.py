"""``python -m specbench``: the same commands as the ``specbench`` script."""

from .cli import main

raise SystemExit(main())
