"""The best number of draft tokens per load, from a `specbench tune` run (pure: rows, requests and
the plan in meta.json → candidates, the best K, the Ks not told apart, and schedules).

Per data set and load point the best K is the one with the highest speedup; the Ks that cannot be
told apart from it are found with a paired bootstrap of each K's speed ratio to the best K over
the prompts both answered (the bootstrap of ``compare.paired_speedup``). K = 0 (no speculation,
the baseline itself) is a candidate too: the answer at high load may be "don't speculate". The
schedule concurrency → K carries the exact vLLM flag that serves it
(``num_speculative_tokens_per_batch_size`` in ``--speculative-config``)."""

from __future__ import annotations

import json
import math
import shlex
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..schemas.cell import LoadPoint, load_of
from ..schemas.meta import RunMeta, baseline_name
from ..schemas.plans import Candidate, KCell, Schedule, TuneFamily, TunePlan, TuneResult
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from .compare import paired_requests, paired_speedup

K_KEYS = ("num_speculative_tokens", "num_speculative_tokens_per_batch_size")
PAIRED_METHOD = ("paired bootstrap of each K's speed ratio to the best K (Σ tokens ÷ Σ latency over the prompts both "
                 "answered, 2000 resamples of prompts): indistinguishable when its 95% CI contains 1.0; K=0 (no "
                 "speculation) is indistinguishable from a speculative best whose own speedup CI contains 1.0")
OVERLAP_METHOD = ("overlapping 95% speedup CIs (requests.jsonl not read): indistinguishable when a K's interval "
                  "overlaps the best K's")



# ------------------------------------------------------------------------------ choosing K

def best_candidate(cands: Sequence[Candidate]) -> Candidate | None:
    """The highest measured speedup; a tie goes to the smaller K (less drafting work)."""
    measured = [c for c in cands if c.speedup is not None]
    return max(measured, key=lambda c: (c.speedup, -c.k)) if measured else None


def _contains_one(ci: tuple[float, float] | None) -> bool:
    return ci is not None and ci[0] <= 1.0 <= ci[1]


def indistinguishable(best: Candidate, cands: Sequence[Candidate],
                      vs_best: dict[int, tuple[float, float] | None] | None) -> list[int]:
    """The Ks (other than the best) whose speed cannot be told apart from the best K's.

    ``vs_best[k]``: 95% CI of K's paired speed ratio to the best K; it contains 1.0 → not told
    apart. K=0 against a speculative best, or a K against K=0 best: that K's own speedup CI
    (which is its ratio to the baseline) contains 1.0. With ``vs_best`` None (no request records)
    the speedup CIs are compared instead: overlapping intervals are not told apart.
    """
    out = []
    for c in cands:
        if c.k == best.k or c.speedup is None:
            continue
        if best.k == 0:
            same = _contains_one(c.ci)
        elif c.k == 0:
            same = _contains_one(best.ci)
        elif vs_best is not None:
            same = _contains_one(vs_best.get(c.k))
        else:
            same = c.ci is not None and best.ci is not None and c.ci[0] <= best.ci[1] and best.ci[0] <= c.ci[1]
        if same:
            out.append(c.k)
    return sorted(out)


def schedule_ranges(by_concurrency: dict[int, int]) -> list[list[int]]:
    """Concurrency → K as vLLM's ``num_speculative_tokens_per_batch_size`` ranges ``[start, end, K]``.

    The first range starts at batch size 1; between two measured concurrencies the boundary is
    their geometric mean (each batch size takes the K of the nearer load on a log scale); vLLM
    carries the last K beyond the last range. Neighbouring ranges with the same K are merged.
    """
    cs = sorted(by_concurrency)
    out: list[list[int]] = []
    start = 1
    for i, c in enumerate(cs):
        end = c if i == len(cs) - 1 else max(c, math.floor(math.sqrt(c * cs[i + 1])))
        k = by_concurrency[c]
        if out and out[-1][2] == k:
            out[-1][1] = end
        else:
            out.append([start, end, k])
        start = end + 1
    return out


@dataclass(frozen=True)
class EngineFlag:
    """What serves a schedule: the speculative config and its exact flag (None: the engine has none), and a note."""

    speculative_config: dict[str, object] | None
    flag: str | None
    note: str


def engine_flag(family: TuneFamily, ranges: list[list[int]]) -> EngineFlag:
    """The speculative config, the exact flag and a note that serve this schedule, where the engine has it."""
    max_k = max(k for _, _, k in ranges)
    if max_k == 0:
        return EngineFlag(None, None, "speculation loses at every load measured: serve without speculative decoding")
    if family.adapter != "vllm":
        return EngineFlag(None, None, (f"engine {family.engine}: no per-batch-size K known to specbench (vLLM has "
                                       "num_speculative_tokens_per_batch_size); serve each load range with its own K"))
    body: dict[str, object] = {"method": family.method}
    if family.drafter:
        body["model"] = family.drafter
    body["num_speculative_tokens"] = max_k
    body.update(family.speculative or {})
    body["num_speculative_tokens_per_batch_size"] = ranges
    note = ("vLLM num_speculative_tokens_per_batch_size: [start, end, K] per running batch size (inclusive; K=0 = no "
            "drafts; K is capped at num_speculative_tokens; the last K carries on beyond the last range; turned off "
            "with data parallelism)")
    return EngineFlag(body, "--speculative-config " + shlex.quote(json.dumps(body, separators=(",", ":"))), note)


def _ci(r: ResultRow | None) -> tuple[float, float] | None:
    ci = ((r.ci95 if r is not None else None) or {}).get("speedup_vs_baseline")
    return (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 and None not in ci else None


def _records_by_cell(requests: Sequence[RequestRecord]) -> dict[tuple[str, str, int], list[RequestRecord]]:
    out: dict[tuple[str, str, int], list[RequestRecord]] = defaultdict(list)
    for r in requests:
        if r.phase == "measure":
            out[(r.config, r.dataset, r.concurrency or 0)].append(r)
    return out


def _conc_key(r: ResultRow) -> int:
    c = r.concurrency if r.request_rate is None else r.max_concurrency
    return int(c or 0)


def tune_analysis(rows: Sequence[ResultRow], requests: Sequence[RequestRecord] | None,
                  meta: RunMeta | None) -> TuneResult:
    """Per data set × family × load: every K's speedup, the best K, the Ks not told apart; the schedules."""
    plan = (meta.tune if meta else None) or TunePlan()
    base = baseline_name(rows, meta)
    by_cell = _records_by_cell(requests) if requests is not None else None
    by_family: dict[tuple[str, str, LoadPoint], dict[int, ResultRow]] = defaultdict(dict)
    for r in rows:
        p = plan.configs.get(r.run)
        if p is not None and p.family is not None and p.k is not None:
            by_family[(r.dataset, p.family, load_of(r))][p.k] = r
    cells = []
    for (dataset, fam, load), by_k in sorted(by_family.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2].sort_key())):
        base_row = next((r for r in rows if r.run == base and r.dataset == dataset and load_of(r) == load), None)
        cands = ([Candidate(0, 1.0)] if base_row is not None and base_row.cell_status == "ok" else [])
        cands += [Candidate(k, r.speedup_vs_baseline if r.cell_status == "ok" else None, _ci(r))
                  for k, r in sorted(by_k.items())]
        best = best_candidate(cands)
        vs_best: dict[int, tuple[float, float] | None] | None = None
        if best is not None and by_cell is not None and best.k != 0:
            vs_best = {}
            best_recs = by_cell.get((by_k[best.k].run, dataset, _conc_key(by_k[best.k])), [])
            for k, r in by_k.items():
                if k == best.k:
                    continue
                ps = paired_speedup(paired_requests(by_cell.get((r.run, dataset, _conc_key(r)), []), best_recs))
                vs_best[k] = ((ps.paired_speedup_ci_low, ps.paired_speedup_ci_high)
                              if ps.paired_speedup_ci_low is not None and ps.paired_speedup_ci_high is not None else None)
        cells.append(KCell(
            dataset, fam, load.kind, load.value,
            [replace(c, vs_best_ci=vs_best.get(c.k) if vs_best else None) for c in cands],
            best=None if best is None else best.k, best_speedup=None if best is None else best.speedup,
            best_ci=None if best is None else best.ci,
            indistinguishable=[] if best is None else indistinguishable(best, cands, vs_best)))
    return TuneResult(PAIRED_METHOD if by_cell is not None else OVERLAP_METHOD, cells, schedules(cells, plan))


def schedules(cells: Sequence[KCell], plan: TunePlan) -> list[Schedule]:
    """Per family: concurrency → K. One data set: its best K. Several: the K with the highest geometric
    mean speedup over the data sets (K=0 counts 1.0), among Ks measured on all of them."""
    out = []
    for fam, info in plan.families.items():
        conc_cells = [c for c in cells if c.family == fam and c.kind == "concurrency" and c.load is not None]
        by_conc: dict[int, int] = {}
        for conc in sorted({int(c.load) for c in conc_cells if c.load is not None}):
            here = [c for c in conc_cells if c.load is not None and int(c.load) == conc]
            if len(here) == 1:
                if here[0].best is not None:
                    by_conc[conc] = here[0].best
                continue
            per_k: dict[int, list[float]] = defaultdict(list)
            for c in here:
                for cand in c.candidates:
                    if cand.speedup is not None and cand.speedup > 0:
                        per_k[cand.k].append(cand.speedup)
            full = {k: v for k, v in per_k.items() if len(v) == len(here)}
            if full:
                by_conc[conc] = max(full, key=lambda k: (math.exp(sum(map(math.log, full[k])) / len(full[k])), -k))
        if not by_conc:
            continue
        ranges = schedule_ranges(by_conc)
        serve = engine_flag(info, ranges)
        out.append(Schedule(fam, info.engine, sorted({c.dataset for c in conc_cells}),
                            {str(c): k for c, k in by_conc.items()}, ranges, serve.speculative_config, serve.flag, serve.note))
    return out


def analysis_of(rows: Sequence[ResultRow], meta: RunMeta | None) -> TuneResult | None:
    """The stored analysis (paired, written at the end of ``specbench tune``), else one from the rows alone."""
    plan = meta.tune if meta else None
    if plan is None:
        return None
    return plan.result or tune_analysis(rows, None, meta)
