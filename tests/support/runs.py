"""The run stage as a command drives it: results.md rendered by the report stage's markdown table
(``specbench run`` hands the renderer in; the run stage never imports report)."""

from __future__ import annotations

from typing import Any

from specbench.report.markdown import markdown
from specbench.run import RunSession as _RunSession
from specbench.run import run_suite as _run_suite
from specbench.run.parallel import run_parallel as _run_parallel


async def run_suite(*args: Any, **kwargs: Any):
    return await _run_suite(*args, render=markdown, **kwargs)


async def run_parallel(*args: Any, **kwargs: Any):
    return await _run_parallel(*args, render=markdown, **kwargs)


def RunSession(*args: Any, **kwargs: Any) -> _RunSession:  # noqa: N802 (stands in for the class)
    return _RunSession(*args, render=markdown, **kwargs)
