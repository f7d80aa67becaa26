"""What the host's own packages require of what the bundle packs.

A bundled wheel goes in front of the host's site-packages on ``PYTHONPATH``, so it replaces the
host's copy for every package that the engine still takes from the host. Those packages' own
``Requires-Dist`` must hold for what is packed: the host's transformers 5.17 refuses to import next
to a bundled huggingface-hub 2.4 (it asks ``>=1.5.0,<2.0``), although the engine's graph alone
allows it. A ``pip inspect`` report carries every host package's requirements; for a
``pip list`` / ``pip freeze`` list they are read from the index (the host's exact versions).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import SpecbenchError
from .plan import Plan, applies, host_ok, is_excluded


def inspect_requires(text: str, source: str = "host packages") -> dict[str, list[Requirement]] | None:
    """Each package's ``Requires-Dist`` from a ``pip inspect`` report; None for a list that carries none."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        items = json.loads(text)["installed"]
        out: dict[str, list[Requirement]] = {}
        for item in items:
            meta = item["metadata"]
            out[canonicalize_name(meta["name"])] = parsed_requirements(meta.get("requires_dist") or [])
    except (ValueError, KeyError, TypeError) as e:
        raise SpecbenchError(f"{source}: not a `pip inspect` report ({type(e).__name__}: {e})") from None
    return out


def parsed_requirements(texts: list[str]) -> list[Requirement]:
    """``Requires-Dist`` lines as requirements; one that does not parse constrains nothing."""
    out = []
    for text in texts:
        try:
            out.append(Requirement(text))
        except InvalidRequirement:
            continue
    return out


@dataclass
class HostNeeds:
    """What the host packages the engine keeps using (name → host version) require: packed name →
    host package → its specifier."""

    users: dict[str, str | None]
    asks: dict[str, dict[str, SpecifierSet]] = field(default_factory=dict)

    def spec(self, name: str) -> SpecifierSet:
        out = SpecifierSet()
        for spec in self.asks[name].values():
            out &= spec
        return out

    def unmet(self, plan: Plan) -> dict[str, str]:
        """Packed wheels a host package would refuse: name → the packed version."""
        return {r.name: r.version for r in plan.bundle if r.name in self.asks and not host_ok(r.version, self.spec(r.name))}

    def text(self, name: str) -> str:
        who = ", ".join(f"{u} {self.users[u]}" if self.users.get(u) else u for u in self.asks[name])
        return f"{name}{self.spec(name)} (the host's {who})"


def staying(plan: Plan, host: dict[str, str | None], with_excluded: bool) -> dict[str, str | None]:
    """The host packages the engine's graph takes from the host: those the plan uses and, when
    ``with_excluded``, the excluded ones the host has (its torch)."""
    names = set(plan.host_used) | ({n for n in plan.excluded if n in host} if with_excluded else set())
    return {n: host.get(n) for n in sorted(names)}


def host_needs(users: dict[str, str | None], requires: dict[str, list[Requirement]], env: dict[str, str],
               exclude: tuple[str, ...]) -> HostNeeds:
    """Every requirement of ``users`` for the target (no extras: which ones the host installed is not
    known) on a package that could be packed; excluded packages are the host's own business."""
    needs = HostNeeds(users)
    for user in users:
        for req in requires.get(user, []):
            name = canonicalize_name(req.name)
            if name == user or is_excluded(name, exclude) or not applies(req, env, set()):
                continue
            asks = needs.asks.setdefault(name, {})
            asks[user] = asks.get(user, SpecifierSet()) & req.specifier
    return needs


HOST_ROUNDS = 8


@dataclass
class HostFit:
    """The plan every host package the engine keeps using accepts; the constraints that took (name →
    ``{"required", "by"}``), the host packages whose requirements could not be read (name → why), and
    the host packages packed after all because their needs and the engine's cannot both hold."""

    plan: Plan
    honoured: dict[str, dict[str, object]]
    unknown: dict[str, str]
    conflicts: list[str]


def fit_host(plan_with: Callable[[list[str], set[str]], Plan],
             read_requires: Callable[[dict[str, str]], tuple[dict[str, list[Requirement]], dict[str, str]]],
             host: dict[str, str | None], listed: dict[str, list[Requirement]] | None, env: dict[str, str],
             exclude: tuple[str, ...], log: Callable[[str], None]) -> HostFit:
    """Resolve and plan (``plan_with(constraints, host packages not to use)``) until no packed wheel
    is one that a host package the engine keeps using would refuse. Each refused one goes back to pip
    as a constraint (the host's transformers' ``huggingface-hub>=1.5.0,<2.0``), so pip picks versions
    around it; when pip finds none, the host packages that asked are packed too (the engine's choice
    of version, shadowing the host's) and their constraints dropped.

    ``listed``: the requirements a ``pip inspect`` list carries (its excluded packages count too: the
    host's torch); None: ``read_requires`` reads those of the host's exact versions from the index."""
    known: dict[str, list[Requirement]] = dict(listed or {})
    unknown: dict[str, str] = {}
    asked: dict[str, dict[str, SpecifierSet]] = {}  # host package → what it asks of packed wheels
    shadow: set[str] = set()
    conflicts: list[str] = []
    latest: set[str] = set()
    for _ in range(HOST_ROUNDS):
        honour = merged(asked)
        try:
            plan = plan_with([f"{n}{s}" for n, s in honour.items()], shadow)
        except SpecbenchError as e:
            if not latest:
                raise
            for user in sorted(latest):
                wants = ", ".join(f"{n}{s}" for n, s in asked[user].items())
                conflicts.append(f"{user}: the host's {host.get(user)} needs {wants}, which the engine's requirements rule out; "
                                 f"packed the engine's {user} instead (it shadows the host's)")
                log(f"host: pip finds no resolution with the host's {user} {host.get(user)} asking {wants} "
                    f"({first_error_line(e)}): packing {user} too")
                del asked[user]
            shadow |= latest
            latest = set()
            continue
        users = {n: v for n, v in staying(plan, host, with_excluded=listed is not None).items() if n not in shadow}
        if listed is None:
            read_missing(users, known, unknown, read_requires)
        needs = host_needs(users, known, env, exclude)
        unmet = needs.unmet(plan)
        if not unmet:
            return HostFit(plan, {n: {"required": str(s), "by": sorted(u for u in asked if n in asked[u])}
                                  for n, s in sorted(honour.items())}, unknown, conflicts)
        latest = set()
        for name, version in unmet.items():
            if name in honour and (honour[name] & needs.spec(name)) == honour[name]:
                raise SpecbenchError(f"bundle: {name} {version} is packed (a --with wheel or pin), but {needs.text(name)}")
            for user, spec in needs.asks[name].items():
                asked.setdefault(user, {})[name] = spec
                latest.add(user)
            log(f"host: {needs.text(name)}; packing {name} {version} would shadow that: resolving again with {name}{needs.spec(name)}")
    raise SpecbenchError(f"bundle: the host packages' requirements did not settle in {HOST_ROUNDS} resolutions: "
                         + "; ".join(f"{n}{s}" for n, s in merged(asked).items()))


def merged(asked: dict[str, dict[str, SpecifierSet]]) -> dict[str, SpecifierSet]:
    """One specifier per packed name: every host package's ask of it."""
    out: dict[str, SpecifierSet] = {}
    for wants in asked.values():
        for name, spec in wants.items():
            out[name] = out.get(name, SpecifierSet()) & spec
    return dict(sorted(out.items()))


def read_missing(users: dict[str, str | None], known: dict[str, list[Requirement]], unknown: dict[str, str],
                 read_requires: Callable[[dict[str, str]], tuple[dict[str, list[Requirement]], dict[str, str]]]) -> None:
    """Read from the index the requirements of the host's versions not read yet (a freeze list carries none)."""
    ask: dict[str, str] = {}
    for name, version in users.items():
        if name in known or name in unknown:
            continue
        try:
            ask[name] = Version(version or "").public
        except InvalidVersion:
            unknown[name] = f"{name}: {'no version' if not version else repr(version)} in the host list"
    if ask:
        got, missed = read_requires(ask)
        known.update(got)
        unknown.update(missed)
        for name in set(ask) - set(got) - set(missed):
            unknown[name] = f"{name}=={ask[name]}: not in pip's report"


def first_error_line(err: Exception) -> str:
    lines = [x for x in str(err).splitlines() if x.strip().startswith("ERROR:")] or str(err).splitlines()[:1]
    return lines[-1].strip() if lines else type(err).__name__
