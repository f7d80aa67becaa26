"""A profile replayed: which profile entry each (data set, k) takes, and what the replay measured against it.

`specbench whatif SUITE --profile FILE` serves each speculative config of the suite, once per data set, at the
acceptance of the profile's entry for that (data set, k = the config's num_speculative_tokens), whatever the
profile's config was called. Pure: a parsed profile file → checked entries → the choice per (data set, k); the
rows of the run + the plan in meta.json → one ``ReplayPoint`` per data set, config and load.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ProfileError, ResultsError
from ..schemas.cell import LoadPoint, load_of
from ..schemas.meta import RunMeta
from ..schemas.plans import ProfileRef, ReplayedConfig
from ..schemas.profile_file import FORMAT, ProfileEntry, ProfileFile
from ..schemas.row import ResultRow
from ..util.numbers import is_number
from .break_even import whatif_plan
from .profile import LENGTH_TOLERANCE, rates_problem

#: measured vs the profile's acceptance length: a larger relative gap is flagged ⚠ beside the replay
LENGTH_FLAG = 0.03


@dataclass(frozen=True)
class Entry:
    """One checked entry of a profile file."""

    index: int
    config: str
    dataset: str
    k: int
    rates: tuple[float, ...]
    length: float
    estimated: tuple[int, ...]
    load: LoadPoint
    speedup: float | None
    ci: tuple[float, float] | None
    drafts: int | None


def read_entry(e: ProfileEntry, i: int, where: str) -> Entry:
    """One entry of a profile file (its types already read strictly), checked as vLLM checks its rates."""
    at = f"{where}: profiles[{i}]"
    for key, name in (("dataset", e.dataset), ("config", e.config)):
        if not name:
            raise ProfileError(f"{at}.{key}: expected a name, got {name!r}")
    k = e.num_speculative_tokens
    if k is None or k < 1:
        raise ProfileError(f"{at}.num_speculative_tokens: expected a positive integer, got {k!r}")
    rates = e.acceptance_per_position
    if rates is None:
        raise ProfileError(f"{at}.acceptance_per_position: expected a list of k = {k} rates, got None")
    why = rates_problem(rates, k)
    if why:
        raise ProfileError(f"{at}.acceptance_per_position: {why}")
    length = e.mean_acceptance_length
    if length is None:
        length = 1 + math.fsum(rates)
    if abs(1 + math.fsum(rates) - length) > LENGTH_TOLERANCE:
        raise ProfileError(f"{at}.mean_acceptance_length: expected 1 + Σ acceptance_per_position = "
                           f"{1 + math.fsum(rates):.4f}, got {length!r}")
    est = e.estimated_positions or []
    if not all(1 <= j <= k for j in est):
        raise ProfileError(f"{at}.estimated_positions: expected 1-based positions in 1..{k}, got {est!r}")
    load = LoadPoint.of("rate", e.request_rate) if e.request_rate is not None else LoadPoint.of("concurrency", e.concurrency)
    ci = e.speedup_ci95
    return Entry(i, e.config or "", e.dataset or "", k, tuple(float(p) for p in rates), float(length), tuple(est), load,
                 None if e.speedup_vs_baseline is None else float(e.speedup_vs_baseline),
                 (float(ci[0]), float(ci[1])) if ci is not None and len(ci) == 2 and ci[0] is not None and ci[1] is not None
                 else None,
                 e.spec_drafts if e.spec_drafts is not None and e.spec_drafts > 0 else None)


def read_profile(data: object, where: str) -> list[Entry]:
    """A parsed profile file's entries, read strictly (``ProfileFile``) and each checked as vLLM checks
    synthetic_acceptance_rates; ProfileError (one line naming the file and key) otherwise."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ProfileError(f"{where}: format: expected {FORMAT!r} (a file written by specbench profile), got {got!r}")
    entries = data.get("profiles")
    if not isinstance(entries, list) or not entries:
        raise ProfileError(f"{where}: profiles: expected a non-empty list, got {entries!r}")
    try:
        profile = ProfileFile.from_dict(data, where)
    except ResultsError as err:
        raise ProfileError(str(err)) from None
    return [read_entry(e, i, where) for i, e in enumerate(profile.profiles)]


@dataclass(frozen=True)
class Choice:
    """The acceptance a (data set, k) is replayed at: one entry, or one config's entries at several loads pooled."""

    dataset: str
    k: int
    rates: tuple[float, ...]
    length: float
    estimated: tuple[int, ...]
    entries: tuple[Entry, ...]
    pooled: str | None  # how several loads' rates were combined (None: one entry)


def choose(entries: Sequence[Entry], dataset: str, k: int, where: str, config: str) -> Choice | None:
    """The profile's acceptance for ``dataset`` at ``k``; None when the profile has no such data set at all.

    Entries of one config at several loads are pooled (weighted by their drafts when every one says how many,
    else equally); entries of two configs for one (data set, k) are ambiguous and refused.
    """
    of_set = [e for e in entries if e.dataset == dataset]
    if not of_set:
        return None
    mine = [e for e in of_set if e.k == k]
    if not mine:
        have = ", ".join(sorted({f"k={e.k}" for e in of_set}))
        raise ProfileError(f"{where}: no profile for data set {dataset!r} at k={k} (config {config!r} has "
                           f"num_speculative_tokens: {k}); for {dataset!r} it has {have}")
    names = sorted({e.config for e in mine})
    if len(names) > 1:
        raise ProfileError(f"{where}: data set {dataset!r} at k={k} has profiles of {len(names)} configs "
                           f"({', '.join(names)}); keep one in the file (profiles[].config)")
    if len(mine) == 1:
        e = mine[0]
        return Choice(dataset, k, e.rates, e.length, e.estimated, (e,), None)
    weighted = all(e.drafts for e in mine)
    w = [float(e.drafts or 0) if weighted else 1.0 for e in mine]
    rates = tuple(math.fsum(wi * e.rates[j] for wi, e in zip(w, mine)) / sum(w) for j in range(k))
    how = (f"{len(mine)} load points pooled " + ("by their drafts (the counters' own weights)" if weighted else "equally"))
    return Choice(dataset, k, rates, 1 + math.fsum(rates), tuple(sorted({j for e in mine for j in e.estimated})),
                  tuple(mine), how)


# ------------------------------------------------------------------------------ reading the replay back

@dataclass(frozen=True)
class ReplayPoint:
    dataset: str
    config: str  # the suite's config the replay is of
    run: str  # the derived config that ran it
    k: int | None
    load: LoadPoint
    mode: str  # "rates": every position replayed (vLLM); "mean_length": the mean only (SGLang)
    predicted: float | None  # the replay's speedup_vs_baseline
    ci: tuple[float, float] | None
    measured_length: float | None  # the replay's counter acceptance length
    profile_length: float
    replayed_length: float  # what the engine was asked for (SGLang DSPARK: rounded)
    profile_speedup: float | None
    profile_ci: tuple[float, float] | None
    profile_load_known: bool
    rates: tuple[float, ...] | None
    estimated: tuple[int, ...]
    note: str | None
    length_gap: float | None  # (measured − profile) ÷ profile acceptance length
    flagged: bool  # the gap is beyond LENGTH_FLAG


def _gap(measured: float | None, profile: float) -> float | None:
    return None if measured is None or not profile else (measured - profile) / profile


def _pair(v: object) -> tuple[float, float] | None:
    return (float(v[0]), float(v[1])) if isinstance(v, list) and len(v) == 2 and all(map(is_number, v)) else None


def _profile_speedup(p: ReplayedConfig, load: LoadPoint) -> tuple[float | None, tuple[float, float] | None, bool]:
    """The profile's own speedup at ``load`` (True: at that load), else at a load it does not say (False)."""
    for s in p.profile_speedups:
        if s.load.value is not None and s.load == load.uncapped:
            return s.speedup_vs_baseline, s.ci, True
    for s in p.profile_speedups:
        if s.load.value is None:
            return s.speedup_vs_baseline, s.ci, False
    return None, None, True


def replay_points(rows: Sequence[ResultRow], meta: RunMeta | None) -> list[ReplayPoint]:
    """One point per replayed config × data set × load, in data set, config, load order."""
    plan = whatif_plan(meta)
    if not plan.is_replay:
        return []
    configs = plan.replayed()
    out = []
    for r in rows:
        p = configs.get(r.run)
        if p is None or p.acceptance_length is None:
            continue
        load = load_of(r)
        sp, sp_ci, known = _profile_speedup(p, load)
        rates = p.acceptance_per_position
        gap = _gap(r.mean_acceptance_length, float(p.acceptance_length))
        out.append(ReplayPoint(
            r.dataset, str(p.of), r.run, p.k, load, p.mode or "rates", r.speedup_vs_baseline,
            _pair((r.ci95 or {}).get("speedup_vs_baseline")), r.mean_acceptance_length, float(p.acceptance_length),
            float(p.replayed_length or p.acceptance_length), sp, sp_ci, known,
            tuple(rates) if rates is not None else None, tuple(p.estimated_positions), p.note,
            gap, gap is not None and abs(gap) > LENGTH_FLAG))
    return sorted(out, key=lambda x: (x.dataset, x.config, x.load.sort_key()))


@dataclass(frozen=True)
class Replay:
    """A profile's replay: its points, the profile file, and the data sets it had no entry for."""

    points: list[ReplayPoint]
    profile: ProfileRef
    skipped: list[str]


def replay_of(rows: Sequence[ResultRow], meta: RunMeta | None) -> Replay | None:
    """The replay of a `whatif --profile` run (None: a run of another kind)."""
    plan = whatif_plan(meta)
    if plan.profile is None:
        return None
    return Replay(replay_points(rows, meta), plan.profile, list(plan.skipped_datasets or []))
