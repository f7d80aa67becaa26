"""The tables of `specbench whatif` (break-even acceptance per load) and `specbench tune` (best K
per load), rendered from ``measure.break_even`` curves and ``measure.best_k`` analyses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..measure.best_k import analysis_of
from ..measure.break_even import Point, verdict, whatif_curves
from ..schemas.cell import Load
from ..schemas.row import ResultRow


def _cell(p: Point | None) -> str:
    if p is None or p.speedup is None:
        return "—"
    return f"{p.speedup:.3f}x" + (f" @ {p.measured:.2f}" if p.measured is not None else "")


WHATIF_NOTE = (
    "What-if: each cell is speedup_vs_baseline of the config run with vLLM's synthetic rejection sampler at that "
    "acceptance length (the drafter's real compute, acceptance fixed), @ the acceptance length its counters measured. "
    "Break-even = the lowest acceptance length from which speedup stays ≥ 1.0, linearly interpolated between the two "
    "measured points around 1.0 (x = measured length); never = below 1.0 at every length, always = ≥ 1.0 at every "
    "length; ≈ = the grid alone does not bracket the real drafter, so the crossing is interpolated between the real "
    "config's own (acceptance length, speedup) and the nearest synthetic point. Real = the unmodified config's "
    "counter acceptance length and speedup in the same run. Synthetic "
    "acceptance changes the output (accepted drafts are not the target's tokens), so Same output does not apply to "
    "those rows.")


def whatif_markdown(records: Sequence[ResultRow], meta: dict[str, Any] | None) -> str:
    curves = whatif_curves(records, meta)
    if not curves:
        return ""
    targets = sorted({p.target for c in curves for p in c.points})
    header = ["Dataset", "Config", "Load", *[f"AL {t:g}" for t in targets], "Break-even AL", "Real AL (speedup)", "Verdict"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for c in curves:
        by_t = {p.target: p for p in c.points}
        be_txt = c.break_even_text()
        real = "—"
        if c.real_length is not None:
            sp = c.real_speedup
            real = f"{c.real_length:.2f}" + (f" ({sp:.3f}x)" if sp is not None else "")
        lines.append("| " + " | ".join([c.dataset, c.config, c.load.label, *[_cell(by_t.get(t)) for t in targets],
                                        be_txt, real, verdict(c)]) + " |")
    return "What-if: speedup vs acceptance length\n\n" + "\n".join(lines) + "\n\n- " + WHATIF_NOTE


def _fmt(cand: dict[str, Any] | None) -> str:
    if cand is None or cand["speedup"] is None:
        return "—"
    text = f"{cand['speedup']:.3f}x"
    if cand.get("ci") and cand["k"] != 0:
        text += f" [{cand['ci'][0]:.2f}–{cand['ci'][1]:.2f}]"
    return text


def _label(cell: dict[str, Any]) -> str:
    return Load(cell["kind"], cell["load"]).label


def tune_markdown(records: Sequence[ResultRow], meta: dict[str, Any] | None) -> str:
    result = analysis_of(records, meta)
    if not result or not result["cells"]:
        return ""
    ks = sorted({c["k"] for cell in result["cells"] for c in cell["candidates"]})
    header = ["Dataset", "Family", "Load", *[("K=0 (off)" if k == 0 else f"K={k}") for k in ks], "Best K",
              "Not told apart from the best"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for cell in result["cells"]:
        by_k = {c["k"]: c for c in cell["candidates"]}
        cols = []
        for k in ks:
            text = _fmt(by_k.get(k))
            cols.append(f"**{text}**" if k == cell["best"] and text != "—" else text)
        best = "—" if cell["best"] is None else ("0 (off)" if cell["best"] == 0 else str(cell["best"]))
        alike = ", ".join("0 (off)" if k == 0 else str(k) for k in cell["indistinguishable"]) or "none"
        lines.append("| " + " | ".join([cell["dataset"], cell["family"], _label(cell), *cols, best, alike]) + " |")
    out = "Best K per load\n\n" + "\n".join(lines) + f"\n\n- Told apart by: {result['method']}."
    for s in result.get("schedules") or []:
        sched = ", ".join(f"C={c} → K={k}" for c, k in s["by_concurrency"].items())
        out += f"\n- Schedule {s['family']}: {sched}. " + (f"Serve it with: `{s['flag']}`" if s.get("flag") else s["note"])
    return out
