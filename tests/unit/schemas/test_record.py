"""The record machinery's values (``schemas/record.py`` + ``record_values.py``): where a key declares a range,
NaN/±Infinity is a one-line refusal naming the file and key, in every record, read from a file or a line;
where none is declared it is null, as a value that was not measured. Versions: a strict reader refuses a
newer file, the history's lenient one reads it and says so."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from specbench.errors import ResultsError
from specbench.schemas.docs import SECTIONS
from specbench.schemas.meta import RunMeta
from specbench.schemas.profile_file import ProfileEntry
from specbench.schemas.record import Reader, Record, RowError, key, unknown_paths

NON_FINITE = [math.inf, -math.inf, math.nan]


@dataclass
class Inner(Record):
    rate: float | None = key("a rate", low=0, high=1)
    note: float | None = key("no range")


@dataclass
class Outer(Record):
    FILE = "outer.json"
    length: float | None = key("a length", low=1)
    rates: list[float | None] | None = key("rates", low=0, high=1)
    inner: Inner | None = key("nested")
    free: float | None = key("no range")
    anything: dict[str, float] | None = key("no range either")


@pytest.mark.parametrize("bad", NON_FINITE)
@pytest.mark.parametrize("data, path", [
    (lambda v: {"length": v}, "length"),
    (lambda v: {"rates": [0.5, v]}, "rates"),
    (lambda v: {"inner": {"rate": v}}, "inner.rate"),
])
def test_non_finite_where_a_range_is_declared_is_one_line_naming_file_and_key(bad, data, path):
    with pytest.raises(ResultsError) as err:
        Outer.from_dict(data(bad), "/r/outer.json")
    text = str(err.value)
    assert text.startswith(f"/r/outer.json: {path}: expected ") and "\n" not in text
    assert ("NaN" if math.isnan(bad) else "Infinity") in text
    problems: list[str] = []  # the lenient reader drops it and says so, never keeps it as null
    read = Outer.from_dict({"free": 1.0, **data(bad)}, "/r/outer.json", problems)
    assert len(problems) == 1 and problems[0].startswith(f"/r/outer.json: {path}: ") and read.free == 1.0
    with pytest.raises(RowError, match=f"^{path}: expected "):  # a JSON line: refused too
        Outer.from_line(data(bad))


@pytest.mark.parametrize("bad", NON_FINITE)
def test_non_finite_where_no_range_is_declared_is_null(bad):
    read = Outer.from_dict({"free": bad, "inner": {"note": bad, "rate": 0.5}, "anything": {"a": 1.0}, "extra": [bad]})
    assert read.free is None and read.inner is not None and read.inner.note is None and read.inner.rate == 0.5
    assert read.unknown == {"extra": [None]}


def test_infinity_fails_the_one_test_path_of_a_bound_without_a_high():
    assert Outer.specs()["length"].read(2.0, "length", Reader("x")) == 2.0
    for bad in (math.inf, 1e999, 10 ** 400):
        with pytest.raises(ResultsError, match="^x: length: expected a number"):
            Outer.from_dict({"length": bad}, "x")


def _ranged() -> list[tuple[type[Record], str]]:
    out = []
    for _, records in SECTIONS:
        for record in records:
            out += [(record, name) for name, spec in record.specs().items()
                    if spec.meta.get("low") is not None or spec.meta.get("high") is not None]
    return out


RANGED = _ranged()


def test_the_profile_file_declares_its_ranges():
    names = {name for record, name in RANGED if record is ProfileEntry}
    assert {"mean_acceptance_length", "num_speculative_tokens", "speedup_vs_baseline", "fill_ratio"} <= names


@pytest.mark.parametrize("record, name", RANGED, ids=[f"{r.__name__}.{n}" for r, n in RANGED])
def test_every_ranged_key_of_every_record_refuses_infinity(record, name):
    spec = record.specs()[name]
    origin = getattr(spec.hint, "__origin__", None)
    value = [math.inf] if origin in (list, tuple) or "list" in str(spec.hint) or "tuple" in str(spec.hint) else math.inf
    with pytest.raises(ResultsError) as err:
        record.read({name: value}, Reader("/r/file.json"))
    assert str(err.value).startswith(f"/r/file.json: {name}: expected ")


# ---- versions ----

def test_a_strict_reader_refuses_a_newer_version_in_one_line():
    with pytest.raises(ResultsError, match=r"^/r/meta.json: schema_version 2: written by a newer specbench"):
        RunMeta.from_dict({"schema_version": 2, "started_at": "t"}, "/r/meta.json")


def test_a_reader_given_a_newer_list_reads_a_newer_file_and_says_so():
    newer: list[str] = []
    problems: list[str] = []
    data = {"schema_version": 3, "started_at": "t", "brand_new": 1, "notes": {"now": "an object"},
            "runs": [{"resume": False, "why": "x"}], "servers": {"b": {"pid": 5, "cgroup": "/x"}},
            "suite": {"name": "s", "raw": {"name": "s", "endpoint": "chat"}}, "comparability": {"new_fingerprint": "y"}}
    meta = RunMeta.from_dict(data, "/r/meta.json", problems, newer)
    assert newer == ["schema_version 3 (this version reads meta.json up to 1)"]
    assert meta.started_at == "t" and meta.notes is None and problems == [
        '/r/meta.json: notes: expected a list of texts or objects, got {"now": "an object"}; ignored']
    # the suite as written and the comparability fingerprint hold their extra keys by design: not listed
    assert unknown_paths(meta) == ["brand_new", "servers.*.cgroup", "runs[].why"]  # in the fields' order
    assert meta.to_dict()["brand_new"] == 1 and list(meta.to_dict())[0] == "schema_version"
