"""The self-contained HTML report (issue #9): structure, no network references, nulls, and a real browser.

The fixture run dir ``tests/data/html/run`` (2 data sets × 3 configs × 2 concurrencies, 3 repeats;
regenerate with ``python tests/data/html/make_fixture.py``) holds one failed cell and one cell
without acceptance counters, so "not measured" has to show up on the plots.

The browser test needs Debian's ``chromium`` (``apt-get install -y chromium``) and is skipped
without it. It lays the page out at 1400 px wide, reads each figure's box from the DOM, takes a
screenshot and checks that every plot region has ink and colour in it (PNG decoded with zlib and
numpy only).
"""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from specbench.report.html import (
    NOT_MEASURED,
    PALETTE,
    cdf_points,
    crossings,
    nice_ticks,
    render_html,
    write_html,
)
from specbench.report.markdown import COLUMNS, markdown
from specbench.run.readback import read_requests, read_run
from specbench.schemas.meta import baseline_name
from specbench.schemas.row_read import rows_from
from tests.support.paths import DATA

RUN = DATA / "html" / "run"
PLOTS = ("speedup", "speedup-load", "acceptance-position", "category-acceptance", "latency-cdf")


@pytest.fixture(scope="module")
def run():
    loaded = read_run(RUN)
    return [r.to_dict(reference_first=False) for r in loaded.rows], read_requests(RUN), loaded.meta


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    out = write_html([RUN], tmp_path_factory.mktemp("html") / "report.html")
    return out.read_text()


def figure_of(page: str, plot: str) -> str:
    m = re.search(rf'<figure class="plot" id="fig-{plot}".*?</figure>', page, re.S)
    assert m, f"no figure for {plot}"
    return m.group(0)


def svgs(fragment: str, plot: str) -> list[str]:
    return re.findall(rf'<svg [^>]*data-plot="{plot}".*?</svg>', fragment, re.S)


# ---------------------------------------------------------------------------------------------
# the fixture is what the tests think it is
# ---------------------------------------------------------------------------------------------

def test_fixture_shape(run):
    records, requests, meta = run
    assert {(r["dataset"], r["run"], r["concurrency"]) for r in records} == {
        (d, c, n) for d in ("gsm8k", "mtbench") for c in ("baseline", "ngram_k3", "draft_k5") for n in (1, 8)}
    failed = [r for r in records if r["status"] == "failed"]
    assert [(r["dataset"], r["run"], r["concurrency"]) for r in failed] == [("mtbench", "draft_k5", 8)]
    assert failed[0]["speedup_vs_baseline"] is None
    assert requests and {r.phase for r in requests} == {"measure"}
    assert baseline_name(rows_from(records), meta) == "baseline"


# ---------------------------------------------------------------------------------------------
# structure
# ---------------------------------------------------------------------------------------------

def test_every_plot_is_an_inline_svg_with_a_caption(page):
    assert page.startswith("<!DOCTYPE html>")
    for plot in PLOTS:
        fig = figure_of(page, plot)
        assert svgs(fig, plot), f"{plot}: no inline SVG"
        caption = re.search(r"<figcaption>(.*?)</figcaption>", fig, re.S)
        assert caption and len(caption.group(1)) > 120, f"{plot}: caption missing or too thin to say how"
    # one CDF row per data set × concurrency, one acceptance panel per data set
    assert len(svgs(figure_of(page, "latency-cdf"), "latency-cdf")) == 4
    assert len(svgs(figure_of(page, "acceptance-position"), "acceptance-position")) == 2
    assert len(svgs(figure_of(page, "speedup-load"), "speedup-load")) == 2
    for plot in ("TTFT", "ITL per token", "TPOT"):
        assert plot in figure_of(page, "latency-cdf")


def test_table_has_the_markdown_columns(page, run):
    records = run[0]
    table = re.search(r'<table class="results">.*?</table>', page, re.S).group(0)
    headers = re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", table)
    for column in COLUMNS:
        assert column.header in headers
    assert "Speedup 95% CI" not in headers  # the CI is in the Speedup cell, as in the markdown
    assert "Conc" in headers and "Failed" in headers  # two concurrency values, a failed cell
    assert len(re.findall(r"<tr[ >]", table.split("<tbody>")[1])) == len(records)
    # grouped as the markdown report's tables, every column kept
    groups = re.findall(r'<th scope="colgroup" colspan="(\d+)">(.*?)</th>', table)
    assert [g for _, g in groups] == ["Comparison", "Per request", "Checks"]
    assert sum(int(n) for n, _ in groups) == len(re.findall(r'<th scope="col"', table))
    # the failed cell's throughput is a dash flagged as not measured, not a 0
    bad = re.search(r'<tr class="bad">(.*?)</tr>', table, re.S).group(1)
    assert f'title="{NOT_MEASURED}"' in bad and "0.00" not in bad.split("</td>")[4]


def test_self_contained_no_network_references(page):
    refs = re.findall(r"""\b(?:src|href|xlink:href|action|poster|data)\s*=\s*["']?([^"'\s>]+)""", page, re.I)
    assert refs, "expected at least the in-page navigation links"
    for ref in refs:
        assert not re.match(r"(?:[a-z][a-z0-9+.-]*:)?//", ref, re.I), f"external reference {ref!r}"
        assert ref.startswith("#"), f"unexpected reference {ref!r}"
    without_ns = page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert not re.search(r"https?://", without_ns), "an http(s) URL other than the SVG namespace"
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert "@import" not in page and "url(" not in page


def test_nulls_say_not_measured(page):
    speed = figure_of(page, "speedup")
    # the failed cell: written out, and no bar drawn for it
    assert f"{NOT_MEASURED} (cell failed)" in speed
    spec_rows_with_speedup = 7  # 2 data sets × 2 loads × 2 spec configs, minus the failed cell
    assert len(re.findall(r'class="bar"', speed)) == spec_rows_with_speedup
    load = figure_of(page, "speedup-load")
    assert f"{NOT_MEASURED}: draft_k5 @ C=8 (cell failed)" in load
    cdf = figure_of(page, "latency-cdf")
    assert f"{NOT_MEASURED}: draft_k5 (no successful request)" in cdf
    assert f'draft_k5: <span class="na">{NOT_MEASURED} (cell failed)</span>' in cdf  # its legend entry
    acc = figure_of(page, "acceptance-position")  # ngram_k3 had no counters at c=8 on mtbench
    assert f"{NOT_MEASURED}: ngram_k3 counters @ C=8" in acc


def test_null_acceptance_and_categories_are_not_drawn_as_zero(run):
    records, requests, meta = run
    stripped = copy.deepcopy(records)
    for r in stripped:
        if r["run"] == "ngram_k3":
            for key in list(r):
                if key.startswith("acceptance_pos_") or key in ("acceptance_per_position", "stream_acceptance_joint"):
                    r[key] = None
            for cat in (r.get("categories") or {}).values():
                cat["stream_mean_acceptance_length"] = None
    page = render_html(rows_from(stripped), requests, meta)
    acc = figure_of(page, "acceptance-position")
    assert len(re.findall(rf'class="not-measured">{NOT_MEASURED}: ngram_k3[;<]', acc)) == 2  # one per data set panel
    cats = figure_of(page, "category-acceptance")
    assert f"ngram_k3: {NOT_MEASURED}" in cats
    assert "ngram_k3: 0.00" not in cats and "ngram_k3: 1.00" not in cats


def test_accepted_tokens_per_step_per_cell_and_category():
    """From results carrying accepted_per_step (tests/data/rows/results_golden.json: the fixture's sweep summarised by
    this version): a panel per data set and load point, then per data set and category; a cell without it (the
    failed one) written "not measured", never drawn; results without it get no section at all."""
    rows = rows_from(json.loads((DATA / "rows" / "results_golden.json").read_text()))
    fig = figure_of(render_html(rows, None, None), "accepted-per-step")
    panels = svgs(fig, "accepted-per-step")
    assert len(panels) == 2 + 2 + 2 + 3  # per data set: C=1, C=8, then its categories (gsm8k 2, mtbench 3)
    assert "gsm8k · math (all loads)" in panels[2] and "mtbench C=8" in panels[5]
    assert f"{NOT_MEASURED}: draft_k5 (cell failed)" in panels[5]
    # bars: ngram_k3 has 4 (0–3 accepted) and draft_k5 6 (0–5) in every panel, but draft_k5 none in the failed cell's
    assert [len(re.findall(r'class="bar"', p)) for p in panels] == [10, 10, 10, 10, 10, 4, 10, 10, 10]
    assert "Source: stream chunk sizes." in fig and "<figcaption>" in fig
    records, requests, meta = json.loads((RUN / "results.json").read_text()), None, None
    assert 'id="fig-accepted-per-step"' not in render_html(rows_from(records), requests, meta)


def test_crossover_marked(page):
    load = figure_of(page, "speedup-load")
    assert load.count('class="crossover"') >= 1
    assert re.search(r"<b>gsm8k</b>.*?<code>draft_k5</code>: drops below 1.0 between concurrency 1 \([\d.]+×\) "
                     r"and 8 \(0\.[\d]+×\)", load)
    assert re.search(r"<code>ngram_k3</code>: stays at or above 1.0", load)


def test_without_requests_or_sweep(run):
    records, _, meta = run
    one_load = [r for r in records if r["concurrency"] == 1]
    page = render_html(rows_from(one_load), None, meta)
    assert 'id="fig-speedup-load"' not in page  # a single concurrency: no sweep plot
    cdf = figure_of(page, "latency-cdf")
    assert f"{NOT_MEASURED} (requests.jsonl not available for these results)" in cdf
    for plot in ("speedup", "acceptance-position", "category-acceptance"):
        assert svgs(figure_of(page, plot), plot)


def test_no_baseline_and_empty(run):
    records, _, _ = run
    spec_only = [r for r in records if r["run"] != "baseline"]
    page = render_html(rows_from(spec_only), None, {})
    assert f"{NOT_MEASURED} (no baseline config in these results)" in figure_of(page, "speedup")
    empty = render_html(rows_from([]), None, None)
    assert "<table" in empty and NOT_MEASURED in empty


def test_reference_records_without_extras():
    """Results in the reference format only (no concurrency, categories, CIs or requests) still render."""
    records = json.loads((DATA / "gate" / "results_example.json").read_text())
    page = render_html(rows_from(records), None, None)
    speed = figure_of(page, "speedup")
    spec = [r for r in records if r["run"] != "baseline" and r["speedup_vs_baseline"] is not None]
    assert len(re.findall(r'class="bar"', speed)) == len(spec)
    assert "(no CI)" in speed and "no requests paired" in speed
    assert len(svgs(figure_of(page, "acceptance-position"), "acceptance-position")) == len({r["dataset"] for r in records})
    assert NOT_MEASURED in figure_of(page, "category-acceptance")
    assert 'id="fig-speedup-load"' not in page


def test_request_rate_sweep():
    base = {"dataset": "d", "method": "x", "num_speculative_tokens": 3, "concurrency": None}
    records = []
    for rate, sp in ((1.0, 1.3), (4.0, 1.1), (16.0, 0.8)):
        records += [dict(base, run="baseline", method="baseline", num_speculative_tokens=None, request_rate=rate,
                         speedup_vs_baseline=1.0),
                    dict(base, run="spec", request_rate=rate, speedup_vs_baseline=sp)]
    load = figure_of(render_html(rows_from(records), None, None), "speedup-load")
    assert "Speed-up vs request rate" in load
    assert re.search(r"drops below 1.0 between request rate 4 req/s \(1.100×\) and 16 req/s \(0.800×\); "
                     r"≈ 6.35 req/s by linear interpolation in log\(request rate\)", load)


def test_write_html_to_directory_and_merge(tmp_path):
    out = write_html([RUN, RUN / "results.json"], tmp_path)
    assert out == tmp_path / "report.html"
    text = out.read_text()
    assert "merged from" in text


def test_html_escaping(run):
    records, _, meta = run
    evil = copy.deepcopy(records)
    for r in evil:
        if r["run"] == "ngram_k3":
            r["run"] = "<script>alert(1)</script>"
    page = render_html(rows_from(evil), None, meta)
    assert "<script>" not in page and "&lt;script&gt;" in page


def notes_of(page: str) -> list[tuple[str, str]]:
    """The page's Notes list as (class, text as shown) per item."""
    section = re.search(r'<section id="sec-notes"><h2>Notes</h2><ul class="notes">(.*?)</ul></section>', page, re.S)
    assert section, "no Notes section"
    return [(cls, html.unescape(text)) for cls, text in re.findall(r'<li(?: class="(\w+)")?>(.*?)</li>', section.group(1))]


def test_row_notes_on_the_page_as_under_the_markdown_tables(run):
    """The cells' notes and warnings (a ⚠ one naming both cells it applies to) reach the page: the markdown's
    lines, in its order and grouping, escaped (a ``<script>`` in a server's error stays text), the ⚠ ones marked.
    The page used to show meta.json's notes only: a cell's ⚠ never reached it."""
    records, _, meta = run
    noted = copy.deepcopy(records)
    for r in noted:
        if r["run"] == "ngram_k3" and r["concurrency"] == 8:
            r["notes"] = [{"code": "acceptance_not_measured", "values": {"error": "server said <script>alert(1)</script>"}},
                          "C=8: a note an earlier specbench stored as its sentence"]
    rows = rows_from(noted)
    page = render_html(rows, None, meta)
    under_md = [line.removeprefix("- ") for line in markdown(rows, meta).splitlines() if line.startswith("- ")]
    assert [text for _, text in notes_of(page)] == under_md
    warned = [text for cls, text in notes_of(page) if cls == "warning"]
    assert ("⚠ ngram_k3 / gsm8k / C=8, ngram_k3 / mtbench / C=8: acceptance not measured: server said "
            "<script>alert(1)</script>") in warned
    assert [cls == "warning" for cls, _ in notes_of(page)] == [t.startswith("⚠") for t in under_md]
    assert len(warned) == 2 and ("", "ngram_k3 / gsm8k / C=8, ngram_k3 / mtbench / C=8: C=8: a note an earlier specbench "
                                 "stored as its sentence") in notes_of(page)
    assert "<script>" not in page and "server said &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert '<a href="#sec-notes">Notes</a>' in page


# ---------------------------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------------------------

def test_crossings_interpolate():
    assert crossings([(1, 1.4), (8, 0.8)], log=False) == [(0, pytest.approx(1 + 7 * 0.4 / 0.6))]
    (i, x), = crossings([(1, 1.2), (2, 1.1), (4, 0.9)], log=True)
    assert i == 1 and x == pytest.approx(2 * 2 ** 0.5)
    assert crossings([(1, 0.9), (2, 1.1)], log=False) == []  # a rise is not a drop
    assert crossings([(1, 1.0), (2, 1.0)], log=False) == []


def test_cdf_points_step_and_thinning():
    pts = cdf_points(np.array([3.0, 1.0, 2.0]))
    assert pts == [(1.0, 0.0), (1.0, 1 / 3), (2.0, 1 / 3), (2.0, 2 / 3), (3.0, 2 / 3), (3.0, 1.0)]
    many = cdf_points(np.arange(100000, dtype=float), n=200)
    assert len(many) <= 400 and many[-1] == (99999.0, 1.0)


def test_nice_ticks():
    assert nice_ticks(0, 2.0, 5) == [0, 0.5, 1.0, 1.5, 2.0]
    assert nice_ticks(1.0, 3.5, 5) == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]


# ---------------------------------------------------------------------------------------------
# a real browser: the page lays out and every plot region is drawn
# ---------------------------------------------------------------------------------------------

def decode_png(data: bytes) -> np.ndarray:
    """8-bit non-interlaced grey/RGB/RGBA PNG → (h, w, channels) uint8; zlib + numpy only.

    Paeth and Average filters make each byte depend on its left and upper neighbours, so rows are
    reconstructed along anti-diagonals, which are independent of each other's pixels.
    """
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    assert header, "no IHDR"
    w, h, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    assert depth == 8 and interlace == 0 and channels, f"unsupported PNG {header}"
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(h, w * channels + 1)
    ftype = raw[:, 0].astype(np.int16)
    filt = raw[:, 1:].reshape(h, w, channels).astype(np.int16)
    out = np.zeros((h + 1, w + 1, channels), dtype=np.int16)  # a zero row above and column to the left
    for d in range(h + w - 1):
        ys = np.arange(max(0, d - w + 1), min(h - 1, d) + 1)
        xs = d - ys
        a, b, c = out[ys + 1, xs], out[ys, xs + 1], out[ys, xs]
        p = a + b - c
        pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
        paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
        ft = ftype[ys][:, None]
        pred = np.select([ft == 0, ft == 1, ft == 2, ft == 3], [0, a, b, (a + b) // 2], paeth)
        out[ys + 1, xs + 1] = (filt[ys, xs] + pred) & 0xFF
    return out[1:, 1:].astype(np.uint8)


def test_png_decoder_roundtrip():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    img[3:, :, :] = img[2, :, :]  # some flat rows too
    rows = []
    for y in range(7):  # encode each row with a different filter: 0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth
        f = y % 5
        cur = img[y].astype(np.int16).reshape(-1)
        prev = img[y - 1].astype(np.int16).reshape(-1) if y else np.zeros_like(cur)
        left = np.concatenate([np.zeros(3, np.int16), cur[:-3]])
        ul = np.concatenate([np.zeros(3, np.int16), prev[:-3]])
        if f == 0:
            pred = np.zeros_like(cur)
        elif f == 1:
            pred = left
        elif f == 2:
            pred = prev
        elif f == 3:
            pred = (left + prev) // 2
        else:
            p = left + prev - ul
            pa, pb, pc = abs(p - left), abs(p - prev), abs(p - ul)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, ul))
        rows.append(bytes([f]) + ((cur - pred) & 0xFF).astype(np.uint8).tobytes())
    ihdr = struct.pack(">IIBBBBB", 5, 7, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b"")
    assert np.array_equal(decode_png(png), img)


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--force-device-scale-factor=1"]
WIDTH = 1400
PROBE = """<script>
(function(){var out={height:document.documentElement.scrollHeight,figures:{}};
document.querySelectorAll('figure.plot').forEach(function(f){var r=f.getBoundingClientRect();
out.figures[f.dataset.plot]={x:r.left+scrollX,y:r.top+scrollY,w:r.width,h:r.height};});
var p=document.createElement('pre');p.id='probe';p.textContent=JSON.stringify(out);document.body.appendChild(p);})();
</script>"""


def chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="specbench-chromium-")
    try:
        return subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=180, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def layout(html_path: Path, height: int) -> dict:
    """Figure boxes (CSS px, page coordinates) as laid out at WIDTH × height, read from the DOM."""
    probe = html_path.with_name("probe.html")
    probe.write_text(html_path.read_text().replace("</body>", PROBE + "</body>"))
    res = chromium(f"--window-size={WIDTH},{height}", "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="probe">(.*?)</pre>', res.stdout, re.S)
    assert m, f"chromium --dump-dom gave no layout: {res.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def screenshot(html_path: Path, height: int, png: Path) -> np.ndarray:
    res = chromium(f"--window-size={WIDTH},{height}", f"--screenshot={png}", html_path.as_uri())
    assert png.exists() and png.stat().st_size > 1000, f"no screenshot: {res.stderr[-2000:]}"
    return decode_png(png.read_bytes())[:, :, :3]


def ink(region: np.ndarray) -> tuple[float, float]:
    """(share of non-white pixels, share of saturated, i.e. coloured, pixels)."""
    rgb = region.astype(np.int16)
    nonwhite = (rgb < 235).any(axis=2).mean()
    coloured = ((rgb.max(axis=2) - rgb.min(axis=2)) > 60).mean()
    return float(nonwhite), float(coloured)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install -y chromium)")
def test_browser_screenshot_plots_are_drawn(tmp_path):
    html_path = write_html([RUN], tmp_path / "report.html")
    first = layout(html_path, 3000)
    height = max(3000, int(first["height"]) + 10)
    boxes = layout(html_path, height)["figures"] if height != 3000 else first["figures"]
    assert set(PLOTS) <= set(boxes), f"figures laid out: {sorted(boxes)}"
    img = screenshot(html_path, height, tmp_path / "report.png")
    assert img.shape[1] == WIDTH and img.shape[0] >= height - 1
    palette = [tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in PALETTE[:2]]
    for plot in PLOTS:
        b = boxes[plot]
        assert b["w"] > 600 and b["h"] > 200, f"{plot}: figure too small {b}"
        assert b["x"] >= 0 and b["x"] + b["w"] <= WIDTH + 1, f"{plot}: overflows the 1400 px window {b}"
        region = img[int(b["y"]):int(b["y"] + b["h"]), int(b["x"]):int(b["x"] + b["w"])]
        nonwhite, coloured = ink(region)
        assert nonwhite > 0.02, f"{plot}: region is blank ({nonwhite:.3%} non-white)"
        assert coloured > 0.001, f"{plot}: no coloured marks drawn ({coloured:.3%})"
        # the two spec configs' colours are both painted in every plot
        for rgb in palette:
            close = (np.abs(region.astype(np.int16) - np.array(rgb)).sum(axis=2) < 40).sum()
            assert close > 30, f"{plot}: colour {rgb} barely present ({close} px)"
