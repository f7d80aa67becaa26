"""Repeated runs of one suite made in two (or more) modes, side by side: does the mode move the
numbers by more than the runs of one mode differ among themselves? (docs/parallel.md.)

    python benchmarks/gpu/modes_table.py --mode parallel RUN_DIR [RUN_DIR...] \\
        --mode sequential RUN_DIR [RUN_DIR...] [--runs] [-o FILE]

Per cell (data set × load point × non-baseline config) and mode: the per-repeat speedups and
acceptance lengths pooled over the mode's runs, and the GPUs each server used (per server start,
``0/1/0``, where a ``load.restart`` run's starts were given different ones). With two modes or
more, each later mode is compared with the first: Δ of the means against the larger repeat spread
(one table per pair, so a table stays within 14 columns). One mode alone shows its spread only.
``--runs`` adds a table per run: its wall time, its server starts and each cell's speedup with the
run's own 95 % CI and what it is over (issue 40: the between-start CI of ``load.restart``, parallel
vs sequential). Prints markdown (or writes it to FILE), then a "How computed" paragraph to paste with it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.errors import ResultsError
from specbench.run import readback
from specbench.run.readback import warn
from specbench.run.rundir import scan_numbered
from specbench.schemas import PhaseInfo
from specbench.schemas.cell import Cell
from specbench.schemas.meta import RunMeta, baseline_name
from specbench.schemas.row import ResultRow
from specbench.schemas.run_files import PHASES
from specbench.util.numbers import is_number

PROG = "modes_table"
DASH = "—"
#: |Δ| this close to the spread counts as within it (means of equal values can differ in the last bit)
TOLERANCE = 1e-9


class ModesTableError(Exception):
    """What keeps the table from being made, as one line naming the path."""


@dataclass
class Run:
    """One run directory as the table reads it."""

    path: Path
    rows: list[ResultRow]
    meta: RunMeta | None
    phases: list[PhaseInfo]
    notes: list[str] = field(default_factory=list)

    @property
    def baseline(self) -> str | None:
        return baseline_name(self.rows, self.meta)


@dataclass(frozen=True)
class Stats:
    mean: float
    lo: float
    hi: float
    n: int

    @property
    def spread(self) -> float | None:
        """(max − min) ÷ mean; None below two values, where there is no spread to speak of."""
        return (self.hi - self.lo) / self.mean if self.n >= 2 and self.mean > 0 else None


@dataclass(frozen=True)
class Comparison:
    delta: float | None
    spread: float | None
    verdict: str


@dataclass
class CellData:
    """One cell of one mode, pooled over the mode's runs."""

    speedups: list[float] = field(default_factory=list)
    acceptance: list[float] = field(default_factory=list)
    runs: int = 0
    gpus: list[str | None] = field(default_factory=list)


@dataclass
class Mode:
    name: str
    runs: list[Run]
    cells: dict[Cell, CellData]
    notes: list[str]


# ----------------------------------------------------------------------------- reading


def read_run(path: str | Path) -> Run:
    """results.json, meta.json and phases.jsonl of one run; what makes it unreadable is a ``ModesTableError``."""
    path = Path(path)
    if not path.is_dir():
        raise ModesTableError(f"{path}: no such run directory")
    try:
        results = readback.read_run(path, quiet=True)
        lines, bad = scan_numbered(path / PHASES, PHASES)
    except ResultsError as err:
        raise ModesTableError(str(err)) from None
    except OSError as err:
        raise ModesTableError(f"{path}: cannot read: {err.strerror or err}") from None
    warn(results.problems, PROG)
    notes = []
    if not (path / PHASES).exists():
        notes.append(f"{path}: no {PHASES}: acceptance and NVML ids —")
    if bad:
        notes.append(f"{path}/{PHASES}: {len(bad)} unreadable line(s) skipped")
    return Run(path, results.rows, results.meta, [p for _, _, p in lines if isinstance(p, PhaseInfo)], notes)


def repeat_throughputs(row: ResultRow) -> list[float | None] | None:
    """The row's tok/s per repeat (a one-repeat row: its only value); None where the row has none to give."""
    if row.status not in (None, "ok"):
        return None
    if row.output_throughput_tps_repeats:
        return [v if is_number(v) else None for v in row.output_throughput_tps_repeats]
    if row.repeats in (None, 1) and is_number(row.output_throughput_tps):
        return [row.output_throughput_tps]
    return None


def repeat_speedups(run: Run) -> tuple[dict[Cell, list[float]], list[str]]:
    """Each non-baseline cell's speedup per repeat against the baseline's same repeat in this run."""
    baseline = run.baseline
    rows = {Cell.of_row(r): r for r in run.rows}
    out: dict[Cell, list[float]] = {}
    notes = []
    for cell, row in rows.items():
        if cell.config == baseline:
            continue
        out[cell] = []
        base = rows.get(cell.with_config(baseline)) if baseline else None
        ours, theirs = repeat_throughputs(row), repeat_throughputs(base) if base else None
        if base is None:
            notes.append(f"{run.path}: {_where(cell)}: no speedup (no baseline row)")
        elif ours is None or theirs is None:
            failed = next((r.status for r in (row, base) if r.status not in (None, "ok")), None)
            notes.append(f"{run.path}: {_where(cell)}: no speedup ({f'status {failed}' if failed else 'no tok/s'})")
        elif len(ours) != len(theirs):
            notes.append(f"{run.path}: {_where(cell)}: {len(ours)} repeats against the baseline's {len(theirs)}; not paired")
        else:
            out[cell] = [c / b for c, b in zip(ours, theirs) if c is not None and b is not None and b > 0]
    return out, notes


def repeat_acceptance(phases: Sequence[PhaseInfo]) -> dict[Cell, list[float]]:
    """Each cell's mean acceptance length per complete phase (the last phase of a repeat counts)."""
    last: dict[tuple[Cell, int], Any] = {}
    for p in phases:
        if p.complete:
            last[(p.cell, p.repeat)] = p.acceptance.mean_acceptance_length
    out: dict[Cell, list[float]] = {}
    for (cell, _), value in sorted(last.items(), key=lambda kv: kv[0][1]):
        if is_number(value):
            out.setdefault(cell, []).append(float(value))
    return out


def gpu_ids(value: Any) -> tuple[str, ...]:
    """``"0,1"`` or ``["0", "1"]`` as ids; anything else none."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list):
        return tuple(str(v) for v in value if isinstance(v, (str, int)) and not isinstance(v, bool))
    return ()


def meta_gpus(meta: RunMeta | None, config: str) -> tuple[str, ...]:
    """What specbench gave the server: its CUDA_VISIBLE_DEVICES, else ``--parallel``'s placement."""
    if meta is None:
        return ()
    server = (meta.servers or {}).get(config)
    ids = gpu_ids((server.env or {}).get("CUDA_VISIBLE_DEVICES")) if server else ()
    placed = ((meta.parallel.configs if meta.parallel else None) or {}).get(config)
    return ids or (gpu_ids(placed.gpus) if placed else ())


def nvml_gpus(phases: Sequence[PhaseInfo], config: str) -> tuple[str, ...]:
    """The NVML ids telemetry sampled for the config's server, over all its phases."""
    out: list[str] = []
    for p in phases:
        if p.config == config and isinstance(p.telemetry, dict):
            out += [g for g in gpu_ids(p.telemetry.get("gpus")) if g not in out]
    return tuple(out)


def describe_gpus(given: tuple[str, ...], sampled: tuple[str, ...]) -> str | None:
    """``0``; ``0 (NVML 1)`` where NVML sampled other ids; ``1 (NVML)`` where NVML is the only source."""
    shown = "+".join(given)
    if given and sampled and sampled != given:
        return f"{shown} (NVML {'+'.join(sampled)})"
    if given:
        return shown
    return f"{'+'.join(sampled)} (NVML)" if sampled else None


def starts_gpus(meta: RunMeta | None, config: str) -> str | None:
    """``0/1/0``: the devices each server start of the config was given, in turn, where its starts (``load.restart``
    in a parallel run) were given different ones; None where they all had the same (or there was one start)."""
    starts = ((meta.server_starts or {}).get(config) or []) if meta is not None else []
    seen = ["+".join(gpu_ids((s.env or {}).get("CUDA_VISIBLE_DEVICES"))) or DASH for s in starts]
    return "/".join(seen) if len(set(seen)) > 1 else None


def run_gpus(run: Run, config: str) -> str | None:
    """``baseline 0, dspark_k7 1`` for the cell's two servers in one run (``0/1/0``: per server start); None when
    neither is known."""
    names = [n for n in (run.baseline, config) if n]
    found = [starts_gpus(run.meta, n) or describe_gpus(meta_gpus(run.meta, n), nvml_gpus(run.phases, n)) for n in names]
    if not any(found):
        return None
    return ", ".join(f"{n} {g or DASH}" for n, g in zip(names, found))


# ----------------------------------------------------------------------------- pooling and comparing


def summarize_mode(name: str, runs: Sequence[Run]) -> Mode:
    """A mode's cells pooled over its runs, with what kept a number from being counted."""
    cells: dict[Cell, CellData] = {}
    notes = [n for run in runs for n in run.notes]
    for run in runs:
        speedups, why = repeat_speedups(run)
        notes += why
        acceptance = repeat_acceptance(run.phases)
        for cell, values in speedups.items():
            data = cells.setdefault(cell, CellData())
            data.speedups += values
            data.acceptance += acceptance.get(cell, [])
            data.runs += 1
            data.gpus.append(run_gpus(run, cell.config))
    for cell, data in cells.items():
        if data.runs < len(runs):
            notes.append(f"{_where(cell)}: in {data.runs} of {len(runs)} {name} runs")
    return Mode(name, list(runs), cells, notes)


def stats(values: Sequence[float]) -> Stats | None:
    if not values:
        return None
    return Stats(sum(values) / len(values), min(values), max(values), len(values))


def compare(first: Stats | None, second: Stats | None) -> Comparison:
    """Δ = (second − first) ÷ first; within spread when |Δ| ≤ the larger of the two modes' spreads."""
    if first is None or second is None or first.mean <= 0:
        return Comparison(None, None, DASH)
    delta = (second.mean - first.mean) / first.mean
    if first.spread is None or second.spread is None:
        return Comparison(delta, None, DASH)
    spread = max(first.spread, second.spread)
    return Comparison(delta, spread, "within spread" if abs(delta) <= spread + TOLERANCE else "outside spread")


def comparability_note(runs: Sequence[Run]) -> str | None:
    """Which of meta.json's comparability keys differ between the runs (None when they all agree)."""
    seen = [(r.path, r.meta.comparability.to_dict()) for r in runs if r.meta and r.meta.comparability]
    if not seen:
        return None
    keys = sorted({k for _, c in seen for k in c if any(c.get(k) != other.get(k) for _, other in seen)})
    return f"the runs differ in meta.json comparability: {', '.join(keys)}" if keys else None


# ----------------------------------------------------------------------------- rendering


def _where(cell: Cell) -> str:
    return f"{cell.dataset} / {cell.point.label} / {cell.config}"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def show_speedup(s: Stats | None) -> str:
    if s is None:
        return DASH
    return f"{s.mean:.2f}× (n=1)" if s.n == 1 else f"{s.mean:.2f}× ({s.lo:.2f}–{s.hi:.2f}, n={s.n})"


def show_length(s: Stats | None) -> str:
    if s is None:
        return DASH
    return f"{s.mean:.3f} (n=1)" if s.n == 1 else f"{s.mean:.3f} ({s.lo:.3f}–{s.hi:.3f}, n={s.n})"


def pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return DASH
    return f"{value * 100:+.1f} %".replace("-", "−") if signed else f"{value * 100:.1f} %"


def show_gpus(data: CellData | None) -> str:
    """The runs' descriptions, each distinct one once, ``;`` between runs that differ."""
    if data is None:
        return DASH
    distinct = list(dict.fromkeys(g or DASH for g in data.gpus))
    return "; ".join(distinct) if distinct else DASH


def ordered_cells(modes: Sequence[Mode]) -> list[Cell]:
    """Every cell of any mode: by data set and config as first seen, load points ascending."""
    seen = list(dict.fromkeys(c for m in modes for c in m.cells))
    datasets = list(dict.fromkeys(c.dataset for c in seen))
    configs = list(dict.fromkeys(c.config for c in seen))
    return sorted(seen, key=lambda c: (datasets.index(c.dataset), c.request_rate is not None,
                                       c.request_rate or 0, c.concurrency, configs.index(c.config)))


def _table(header: list[str], lines: list[list[str]]) -> str:
    rows = [header, ["---"] * len(header), *lines]
    return "\n".join("| " + " | ".join(_md(x) for x in row) + " |" for row in rows)


def spread_table(mode: Mode) -> str:
    """One mode: its cells' pooled numbers and their spread over repeats."""
    header = ["Data set", "Load", "Config", f"{mode.name} speedup mean (min–max, n)", "Speedup spread",
              f"{mode.name} accept len", "Accept len spread", f"GPUs {mode.name}"]
    lines = []
    for cell in ordered_cells([mode]):
        data = mode.cells[cell]
        sp, al = stats(data.speedups), stats(data.acceptance)
        lines.append([cell.dataset, cell.point.label, cell.config, show_speedup(sp), pct(sp.spread if sp else None),
                      show_length(al), pct(al.spread if al else None), show_gpus(data)])
    return _table(header, lines)


def pair_table(first: Mode, second: Mode) -> tuple[str, list[str]]:
    """Two modes side by side, and a note for each cell one of them lacks."""
    a, b = first.name, second.name
    header = ["Data set", "Load", "Config", f"{a} speedup mean (min–max, n)", f"{b} speedup mean (min–max, n)",
              "Δ speedup", "Repeat spread", "Verdict", f"{a} accept len", f"{b} accept len",
              "Δ accept len (spread)", "Accept verdict", f"GPUs {a}", f"GPUs {b}"]
    lines, notes = [], []
    for cell in ordered_cells([first, second]):
        da, db = first.cells.get(cell), second.cells.get(cell)
        for mode, data in ((first, da), (second, db)):
            if data is None:
                notes.append(f"{_where(cell)}: not in the {mode.name} runs; its columns are —")
        sa, sb = stats(da.speedups if da else []), stats(db.speedups if db else [])
        la, lb = stats(da.acceptance if da else []), stats(db.acceptance if db else [])
        speed, length = compare(sa, sb), compare(la, lb)
        lines.append([cell.dataset, cell.point.label, cell.config, show_speedup(sa), show_speedup(sb),
                      pct(speed.delta, signed=True), pct(speed.spread), speed.verdict, show_length(la), show_length(lb),
                      f"{pct(length.delta, signed=True)} ({pct(length.spread)})" if length.delta is not None else DASH,
                      length.verdict, show_gpus(da), show_gpus(db)])
    return _table(header, lines), notes


HOW_COMPUTED = (
    "**How computed.** Per cell (data set × load point × config) and mode, each repeat's speedup is the "
    "config's output tok/s in that repeat ÷ the baseline's in the same repeat of the same run "
    "(`output_throughput_tps_repeats` in results.json; a one-repeat row: its `output_throughput_tps`), "
    "pooled over all runs of the mode: mean (min–max, n). The acceptance length is each complete phase's "
    "`acceptance.mean_acceptance_length` in phases.jsonl (not interrupted, server alive), pooled the same way. "
    "{compare}"
    "GPUs: the `CUDA_VISIBLE_DEVICES` specbench gave each server (meta.json `servers.<config>.env`, else "
    "`parallel.configs.<config>.gpus`); the NVML ids sampled for it (phases' `telemetry.gpus`) are shown as "
    "`(NVML …)` where they differ or are the only source; `;` separates runs that differ. "
    "— = not recorded or not computable, never 0."
)
HOW_COMPARED = (
    "Δ = (second mode's mean − first mode's) ÷ first mode's; repeat spread = the larger of the two modes' "
    "(max − min) ÷ mean; the verdict is *within spread* when |Δ| ≤ that spread, else *outside spread*, "
    "and — when a mode has fewer than 2 values (no spread to compare with). The same for the acceptance length. "
)
HOW_SPREAD = "Spread = (max − min) ÷ mean over the pooled repeats (— below 2 values). "


def show_seconds(value: Any) -> str:
    return f"{value:,.0f} s" if is_number(value) else DASH


def show_ci(row: ResultRow) -> str:
    """``1.42× [1.30, 1.55]``, ``⚠`` after it where the repeats disagree (``speedup_varies``)."""
    if not is_number(row.speedup_vs_baseline):
        return DASH
    ci = (row.ci95 or {}).get("speedup_vs_baseline")
    shown = f"{row.speedup_vs_baseline:.2f}×"
    if isinstance(ci, list) and len(ci) == 2 and all(is_number(v) for v in ci):
        shown += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return shown + (" ⚠" if row.speedup_varies else "")


def run_table(modes: Sequence[Mode]) -> str:
    """``--runs``: per run, its wall time and server starts, and each cell's speedup with the run's own CI."""
    header = ["Mode", "Run", "Wall time", "Server starts", "Data set", "Load", "Config", "Speedup [95 % CI]", "CI over"]
    lines = []
    for mode in modes:
        for run in mode.runs:
            meta = run.meta
            launches = (meta.server_launches if meta else None) or {}
            starts = str(sum(launches.values())) if launches else DASH
            wall = show_seconds(meta.timing.total_s if meta and meta.timing else None)
            for row in run.rows:
                cell = Cell.of_row(row)
                if cell.config == run.baseline:
                    continue
                lines.append([mode.name, run.path.name, wall, starts, cell.dataset, cell.point.label, cell.config,
                              show_ci(row), row.speedup_ci_method or DASH])
    return _table(header, lines)


HOW_RUNS = (
    "**Per run.** Wall time: meta.json `timing.total_s`; server starts: the sum of `server_launches` over the "
    "configs; speedup and its 95 % CI as the run's results.json gives them (`speedup_vs_baseline`, "
    "`ci95.speedup_vs_baseline`, `speedup_ci_method`: with `load.restart`, Student-t on the log scale over the "
    "paired server starts); ⚠ = `speedup_varies` (Cochran's Q, p < 0.05)."
)


def render(modes: Sequence[Mode], per_run: bool = False) -> str:
    """The markdown: one table (one mode) or one per later mode against the first, notes, how computed; with
    ``per_run`` a table of each run's own wall time, starts and CIs after them."""
    parts: list[str] = []
    notes = list(dict.fromkeys(n for m in modes for n in m.notes))
    if len(modes) == 1:
        parts.append(spread_table(modes[0]))
    for other in modes[1:]:
        table, missing = pair_table(modes[0], other)
        if len(modes) > 2:
            parts.append(f"**{modes[0].name} vs {other.name}**")
        parts.append(table)
        notes += [n for n in missing if n not in notes]
    differ = comparability_note([r for m in modes for r in m.runs])
    if differ:
        notes.insert(0, differ)
    if notes:
        parts.append("Notes:\n\n" + "\n".join(f"- {_md(n)}" for n in notes))
    parts.append(HOW_COMPUTED.format(compare=HOW_COMPARED if len(modes) > 1 else HOW_SPREAD))
    if per_run:
        parts += [run_table(modes), HOW_RUNS]
    return "\n\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0] if __doc__ else None,
                                 usage="%(prog)s --mode NAME RUN_DIR [RUN_DIR ...] [--mode NAME RUN_DIR ...] [--runs] [-o FILE]")
    ap.add_argument("--mode", nargs="+", action="append", required=True, metavar=("NAME", "RUN_DIR"),
                    help="a mode's name, then its run directories (repeat --mode for each mode)")
    ap.add_argument("--runs", action="store_true", help="add a table per run: wall time, server starts, each cell's own CI")
    ap.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the markdown here instead of stdout")
    args = ap.parse_args(argv)
    names = [m[0] for m in args.mode]
    for m in args.mode:
        if len(m) < 2:
            ap.error(f"--mode {m[0]}: give at least one run directory after the name")
    if len(set(names)) != len(names):
        ap.error(f"--mode names must differ: {', '.join(names)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        modes = [summarize_mode(m[0], [read_run(p) for p in m[1:]]) for m in args.mode]
    except ModesTableError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    text = render(modes, per_run=args.runs)
    if args.output:
        try:
            args.output.write_text(text)
        except OSError as err:
            print(f"{PROG}: error: {args.output}: cannot write: {err.strerror or err}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
