"""Acceptance profiles: a drafter's per-position acceptance read from a run's counters (or from a
results file in the reference format), written so `specbench whatif --profile` can replay it.

Positions are 1-based: ``acceptance_per_position[i-1]`` = p_i = P(the first i drafts of a step are all
accepted), the unconditional rate vLLM's per-position counters give (accepted at position i ÷ drafts).
Expected acceptance length = 1 + Σ p_i. A file that gives fewer positions than k (the reference format
gives p_1..p_3) has the rest filled by ``FILL_RULE``; those positions are listed in ``estimated_positions``.
Pure: rows + meta → profile entries; the command (cli/profile) reads and writes the files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..datasets import REGISTRY
from ..schemas.cell import load_of
from ..schemas.meta import RunMeta, ServerMeta, baseline_name
from ..schemas.profile_file import CategoryAcceptance, ProfileEntry, ProfileProvenance
from ..schemas.row import ResultRow

POSITIONS = ("1-based: acceptance_per_position[i-1] = p_i = P(the first i drafts of a step are all accepted), "
             "unconditional; estimated_positions lists the i whose p_i was filled by fill_rule, not measured")
FILL_RULE = ("geometric continuation: p_j = p_m · r^(j−m) for each position j > m not given (m = the last given "
             "position; p_0 = 1 when none is given), with one r in [0, 1] solved so that 1 + Σ p = the mean acceptance "
             "length: i.i.d. acceptance beyond the last given position (the model of Leviathan et al. 2023), "
             "non-increasing and never above the last given rate")
#: tokens: how far 1 + Σ p may sit from a stated mean acceptance length (both come from the same counters)
LENGTH_TOLERANCE = 0.01
SYNTHETIC_ENV = "SGLANG_SIMULATE_ACC_LEN"


@dataclass(frozen=True)
class Filled:
    rates: list[float]
    estimated: list[int]  # 1-based positions filled by FILL_RULE
    ratio: float | None  # r of FILL_RULE (None: nothing filled)


def conditional(rates: Sequence[float | None]) -> list[float | None]:
    """P(draft i accepted | drafts 1..i−1 accepted) = p_i / p_{i−1}, p_0 = 1; None where p_{i−1} is 0 or unknown."""
    out: list[float | None] = []
    prev: float | None = 1.0
    for p in rates:
        out.append(None if p is None or not prev else p / prev)
        prev = p
    return out


def rates_problem(rates: Sequence[Any], k: int | None = None, name: str = "synthetic_acceptance_rates") -> str | None:
    """What vLLM 0.26 would refuse in ``synthetic_acceptance_rates`` (its own words), or None."""
    vals = list(rates)
    if k is not None and len(vals) != k:
        return f"{name} must have length {k}, got {vals}."
    if any(isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1 for v in vals):
        return f"{name} entries must be in [0, 1], got {vals}."
    if any(b > a for a, b in zip(vals, vals[1:])):
        return f"{name} must be non-increasing, got {vals}."
    return None


def fill_positions(given: Sequence[float], length: float, k: int) -> Filled:
    """p_1..p_k from the first positions given and the mean acceptance length (``FILL_RULE``); ValueError says why not."""
    m, target = len(given), length - 1
    if not 1 <= length <= k + 1:
        raise ValueError(f"mean acceptance length {length:g} is outside [1, k+1] = [1, {k + 1}]")
    why = rates_problem(given, name="the given rates")
    if why:
        raise ValueError(why)
    have = math.fsum(given)
    if m >= k:
        if abs(have - target) > LENGTH_TOLERANCE:
            raise ValueError(f"1 + Σp = {1 + have:.4f} but mean_acceptance_length = {length:.4f} (k = {k})")
        return Filled(list(given[:k]), [], None)
    rest, last, n = target - have, (given[-1] if given else 1.0), k - m
    if rest < -LENGTH_TOLERANCE:
        raise ValueError(f"the {m} given positions already sum to {have:.4f}, more than mean acceptance length − 1 = "
                         f"{target:.4f}")
    if rest > last * n + LENGTH_TOLERANCE:
        raise ValueError(f"the {n} positions not given would need Σ = {rest:.4f}, more than {last * n:.4f} even at r = 1 "
                         f"(none may exceed the last given rate {last:.4f})")
    r = _ratio(last, n, rest)
    return Filled([*given, *(last * r ** j for j in range(1, n + 1))], list(range(m + 1, k + 1)), r)


def _ratio(last: float, n: int, rest: float) -> float:
    """The r in [0, 1] with last · (r + r² + … + rⁿ) = rest (the sum grows with r, so it is unique)."""
    if rest <= 0 or last <= 0:
        return 0.0
    if rest >= last * n:
        return 1.0
    roots = [complex(x) for x in np.polynomial.Polynomial([-rest / last, *([1.0] * n)]).roots()]
    real = [x.real for x in roots if abs(x.imag) < 1e-9 and -1e-9 <= x.real <= 1 + 1e-9]
    return min(max(real[0], 0.0), 1.0)


# ------------------------------------------------------------------------------ rows → profile entries

def synthetic_configs(meta: RunMeta | None) -> set[str]:
    """Configs of a run whose acceptance was fixed by the engine (whatif's replays): not a drafter's profile."""
    if meta is None:
        return set()
    out = set(meta.whatif.configs if meta.whatif else {})
    for c in meta.raw.configs or []:
        if ((c.get("speculative") or {}).get("rejection_sample_method") == "synthetic"
                or SYNTHETIC_ENV in (c.get("env") or {})):
            out.add(str(c.get("name")))
    return out


def _text(value: object) -> str | None:
    """A suite-file value that should be text (the file is hand-written): anything else is not said."""
    return value if isinstance(value, str) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def provenance(meta: RunMeta | None, row: ResultRow, source: str) -> ProfileProvenance:
    """Where a profile comes from: engine, model, drafter, method, k, temperature, recipe, suite; ``missing`` lists
    what the input could not say (a results.json without its meta.json says only what its rows carry)."""
    have = meta or RunMeta()
    raw = have.raw
    config = raw.config(row.run)
    server = (have.servers or {}).get(row.run) or ServerMeta()
    speculative = config.get("speculative")
    spec: Mapping[str, Any] = speculative if isinstance(speculative, dict) else {}
    entries = [d if isinstance(d, dict) else {"name": d} for d in raw.datasets or []]
    entry = next((d for d in entries if d.get("name") == row.dataset), None)
    out = ProfileProvenance(
        source, server.engine or row.engine, server.version or row.server_version,
        (raw.server or {}).get("model_path") or raw.model, raw.model, _text(config.get("drafter")) or spec.get("model"),
        _text(config.get("method")) or row.method, _count(config.get("num_speculative_tokens")) or row.num_speculative_tokens,
        have.comparability.temperature if have.comparability else None, _recipe(entry),
        have.suite.path if have.suite else None, have.suite_file.sha256 if have.suite_file else None,
        have.specbench_version)
    needs_drafter = str(out.method or "").lower() not in ("ngram", "")
    out.missing = [k for k, v in out.to_dict().items() if v is None and k != "missing_why" and (k != "drafter" or needs_drafter)]
    if meta is None:
        out.missing_why = "no meta.json beside the results file: only what its rows carry is known"
    return out


def _recipe(entry: Mapping[str, Any] | None) -> str | None:
    """The recipe a suite's data set entry (as written) names, else its source's default."""
    if entry is None:
        return None
    if entry.get("recipe"):
        return str(entry["recipe"])
    source = entry.get("source") or (entry.get("name") if entry.get("name") in REGISTRY else "file" if entry.get("path") else None)
    return REGISTRY[source].default_recipe if source in REGISTRY else None


def _given(row: ResultRow, k: int) -> list[float]:
    """The measured positions: the counters' full list, else the reference table's acceptance_pos_1..3 (up to the first gap)."""
    per = row.acceptance_per_position
    if per and all(v is not None for v in per):
        return [float(v) for v in per[:k] if v is not None]
    out = []
    for i in range(1, k + 1):
        v = row.get(f"acceptance_pos_{i}")
        if v is None:
            break
        out.append(float(v))
    return out


def _categories(row: ResultRow) -> dict[str, CategoryAcceptance] | None:
    """Per category, from the stream's chunk sizes (the counters are per cell): flagged as such."""
    out = {}
    for cat, v in (row.categories or {}).items():
        joint = v.get("stream_acceptance_joint")
        if not joint and v.get("stream_mean_acceptance_length") is None:
            continue
        out[cat] = CategoryAcceptance(
            joint, v.get("stream_mean_acceptance_length"),
            v.get("stream_acceptance_conditional") or (conditional(joint) if joint else None), v.get("requests"),
            "stream chunk sizes (client side; a chunk that merges steps reads as one long step)")
    return out or None


def profile_entry(row: ResultRow, k: int, meta: RunMeta | None, source: str) -> ProfileEntry:
    """One profile from one results row; ValueError (the reason) when its numbers cannot be one."""
    given = _given(row, k)
    length = row.mean_acceptance_length
    if length is None:
        if len(given) < k:
            raise ValueError("no mean acceptance length, and fewer than k positions to sum")
        length = 1 + math.fsum(given)
    filled = fill_positions(given, float(length), k)
    load = load_of(row)
    ci = (row.ci95 or {}).get("speedup_vs_baseline")
    return ProfileEntry(
        row.run, row.dataset, row.concurrency if row.request_rate is None else row.max_concurrency, row.request_rate,
        load.label, k, filled.rates, float(length), conditional(filled.rates), filled.estimated,
        FILL_RULE if filled.estimated else None, filled.ratio, len(given),
        row.acceptance_source or f"{source}: acceptance_pos_1..{len(given)} and mean_acceptance_length as given",
        row.spec_drafts, row.speedup_vs_baseline, list(ci) if isinstance(ci, list) and len(ci) == 2 else None,
        row.status, _categories(row), provenance(meta, row, source))


def profiles_from(rows: Sequence[ResultRow], meta: RunMeta | None, source: str,
                  note: Callable[[str], None]) -> tuple[list[ProfileEntry], list[str]]:
    """Every speculative config × data set × load point of a results file → (profiles, refusals, one line each).

    The baseline is skipped; configs whose acceptance was synthetic and rows with no acceptance at all are left
    out, said through ``note`` once per config and reason; a row whose numbers cannot make a profile
    (``fill_positions``) is a refusal naming the record.
    """
    base = baseline_name(rows, meta)
    synthetic = synthetic_configs(meta)
    out, refused = [], []
    left: dict[tuple[str, str], int] = {}
    for i, row in enumerate(rows):
        if row.run == base or (row.method == "baseline" and row.num_speculative_tokens is None):
            continue
        k = row.num_speculative_tokens
        why = ("its acceptance was synthetic (a what-if replay), not a drafter's" if row.run in synthetic else
               "no num_speculative_tokens (a profile is defined over k draft positions)" if k is None else
               "no acceptance measured" if row.mean_acceptance_length is None and not _given(row, k) else None)
        if why or k is None:
            left[(row.run, why or "")] = left.get((row.run, why or ""), 0) + 1
            continue
        try:
            out.append(profile_entry(row, k, meta, source))
        except ValueError as err:
            refused.append(f"{source}: record {i} ({row.dataset} / {row.run} / {load_of(row).label}): refused: {err}")
    for (config, why), n in left.items():
        note(f"{source}: config {config!r} ({n} record{'s' if n > 1 else ''}) left out: {why}")
    return out, refused
