"""What each data set actually sent: a sha256 over its prompts as loaded, kept in meta.json
(``prompts``, beside the suite's ``comparability``), and the ``--resume`` check against it.

The comparability fingerprint covers a data set's suite entry, not the file it names: a prompt file
edited between a run and its resume (same ids, new texts) kept it, and the resumed cells were paired
with different prompts. The hash covers, in order, each prompt's id (what pairs it across configs),
its turns after the recipe and its system message (what the server gets); a category label is not
sent, so it is left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from ..datasets.sources import hub_label, hub_source, local_file
from ..errors import SuiteError
from ..schemas.meta import PromptSet, RunMeta
from ..schemas.notes import Note, NoteCode
from ..schemas.request import Prompt
from ..suite import Suite


def prompts_sha256(prompts: Iterable[Prompt]) -> str:
    """The sha256 of the prompts' ids, turns and system messages, in order."""
    sent = [[p.id, list(p.turns), p.system] for p in prompts]
    return hashlib.sha256(json.dumps(sent, ensure_ascii=False).encode()).hexdigest()


def prompt_prints(suite: Suite, prompts: dict[str, list[Prompt]]) -> dict[str, PromptSet]:
    """Each loaded data set's ``PromptSet``: its hash, how many prompts, the file (or hub split) read."""
    prints = {}
    for spec in suite.datasets:
        if spec.name not in prompts:
            continue
        path, hub = local_file(spec, suite.data_dir), hub_source(spec)
        source = str(path) if path is not None else hub_label(hub) if hub is not None else None
        prints[spec.name] = PromptSet(sha256=prompts_sha256(prompts[spec.name]), prompts=len(prompts[spec.name]),
                                      source=source)
    return prints


def check_resumed_prompts(suite: Suite, run: Path, previous: RunMeta, prints: dict[str, PromptSet],
                          measured: set[str]) -> None:
    """Refuse a resume whose prompts differ from those a measured data set was run with: one line
    naming the data set and its file. A data set never measured may change; a meta.json without
    ``prompts`` (an older run) cannot be checked and is accepted (``merge_prints`` says so)."""
    for name, now in prints.items():
        then = (previous.prompts or {}).get(name)
        if then is None or name not in measured or then.sha256 == now.sha256:
            continue
        where = now.source or then.source or "its source"
        raise SuiteError(
            f"{suite.path}: cannot resume {run}: the prompts of data set {name!r} changed since they were measured "
            f"({where}: {then.prompts} prompts sha256 {str(then.sha256)[:12]}, now {now.prompts} prompts sha256 "
            f"{str(now.sha256)[:12]}); measure them in a new run (-o DIR) or start this one again (--overwrite)")


def merge_prints(meta: RunMeta, prints: dict[str, PromptSet]) -> tuple[Note, ...]:
    """Record a resumed run's ``prints`` in its ``meta`` (after ``check_resumed_prompts``: only a data set
    not measured yet can differ, and it takes the new hash). A meta.json without ``prompts`` stays
    without: its earlier cells' prompts are unknown and a hash written now would claim otherwise; the
    note that says so is kept (once) in ``run_dir_notes`` and returned, to be said."""
    if meta.prompts is not None:
        meta.prompts.update(prints)
        return ()
    unchecked = Note.of(NoteCode.PROMPTS_UNCHECKED)  # said once, kept under the table
    if unchecked not in (meta.run_dir_notes or []):
        meta.set_aside([], [unchecked])
    return (unchecked,)
