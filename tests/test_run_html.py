"""`torchlint run --html`: the report of every shipped run fixture as one self-contained HTML file,
its structure checked here without a browser, and a few of them rendered in a real headless
Chromium (started by the test; skipped, saying why, where none is installed)."""

from __future__ import annotations

import html.parser
from html import unescape
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "run"
SCRIPTS = sorted(list(FIXTURES.glob("*.py")) + list(FIXTURES.glob("*.py.txt")))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def _name(path: Path) -> str:
    return path.name.split(".")[0]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """name -> (json report, html text) for every run fixture (one batch process, torch imported once)."""
    out = tmp_path_factory.mktemp("run-html")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-m", "torchlint.runtime._batch", str(out)] + [str(p.relative_to(ROOT)) for p in SCRIPTS],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = {}
    for script in SCRIPTS:
        page = out / f"{_name(script)}.html"
        assert page.exists(), f"no HTML report for {script.name}"
        found[_name(script)] = (json.loads((out / f"{_name(script)}.json").read_text(encoding="utf-8")),
                                page.read_text(encoding="utf-8"), page)
    return found


class _Tree(html.parser.HTMLParser):
    """Tags with their attributes, and the text, of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags = []
        self.text = []
        self.stack = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(text: str) -> _Tree:
    tree = _Tree()
    tree.feed(text)
    return tree


def _with(tree: _Tree, tag: str, cls: str = "", **attrs) -> list:
    return [a for t, a in tree.tags if t == tag and cls in a.get("class", "").split() + [""]
            and all(a.get(k) == v for k, v in attrs.items())]


@pytest.mark.parametrize("script", SCRIPTS, ids=_name)
def test_every_fixture_has_a_self_contained_report(pages, script):
    report, text, _ = pages[_name(script)]
    tree = _parse(text)
    assert text.startswith("<!DOCTYPE html>")
    for tag, attrs in tree.tags:  # nothing fetched: no external script, style sheet, image or font
        assert tag not in ("script", "link", "img", "iframe", "object", "embed"), tag
        for key in ("src", "href", "xlink:href"):
            assert key not in attrs, (tag, attrs)
    assert not re.search(r"url\(|@import|https?://(?!www\.w3\.org)", text.split("<main>")[0])
    for section in ("findings", "gradients", "memory", "shape-trace"):
        assert _with(tree, "section", id=section), section
    # every finding is there, with its status, and its evidence where the run had some
    cards = _with(tree, "div", "finding")
    assert [(c["data-code"], c["data-status"]) for c in cards] == \
        [(f["code"], f["status"]) for f in report["findings"]]
    body = "".join(tree.text)
    for finding in report["findings"]:
        if finding["evidence"]:
            assert finding["evidence"] in body.replace("\n", " ") or finding["evidence"][:60] in body
    if report["memory"]["samples"]:
        assert len(_with(tree, "svg", "chart-memory")) == 1 and _with(tree, "path", "memory-line")
        assert _with(tree, "line", "slope")
    if any(row["norms"] for row in report["gradient_health"]["parameters"]):
        assert len(_with(tree, "svg", "chart-gradients")) == 1
        assert _with(tree, "rect", "band-vanishing") and _with(tree, "rect", "band-exploding")
        assert 1 <= len(_with(tree, "path", "curve")) <= 8


def test_curves_cover_the_watched_steps_and_memory_the_samples(pages):
    report, text, _ = pages["tl003_bad"]
    tree = _parse(text)
    (curve, *_) = _with(tree, "path", "curve")
    assert curve["d"].count("L") == 11  # 12 steps: every step's norm, not only the health table's 5
    (line,) = _with(tree, "path", "memory-line")
    assert line["d"].count("L") == len(report["memory"]["samples"]) - 1
    assert "steady growth" in "".join(tree.text) and "TL003 at fixtures/run/tl003_bad.py:19" in text


def test_many_layers_stay_readable():
    """80 parameters of 40 layers: 8 curves drawn, the layer with a problem first and the extremes
    next; every layer in the table (closed), a layer's weight and bias one curve."""
    from types import SimpleNamespace

    from torchlint.runtime.html import _gradients

    rows = []
    for block in range(40):
        for kind, scale in (("weight", 1.0), ("bias", 0.1)):
            norms = [scale * (block + 1) * (1 + step / 10) for step in range(10)]
            if block == 7 and kind == "weight":
                norms[4] = float("nan")
            rows.append(SimpleNamespace(name=f"blocks.{block}.fc.{kind}", norms=norms, steps_seen=list(range(1, 11)),
                                        problems=1 if block == 7 and kind == "weight" else 0, none=0,
                                        nonfinite=1 if block == 7 and kind == "weight" else 0, feeds_batchnorm=None))
    report = SimpleNamespace(health=rows, thresholds={"vanishing": 1e-7, "exploding": 1e3}, frozen=[])
    tree = _parse(_gradients(report))
    curves = [a["data-module"] for a in _with(tree, "path", "curve")]
    assert len(curves) == 8 and curves[:3] == ["blocks.7.fc", "blocks.39.fc", "blocks.0.fc"]
    table = [t for t, a in tree.tags if t == "tr"]
    assert len(table) == 41  # the header and one row per layer
    assert ("details", {}) in tree.tags  # closed: 40 layers
    assert "8 of 40 layers drawn" in "".join(tree.text)


def test_shape_trace_of_a_failed_forward(pages):
    report, text, _ = pages["tl301_layer_bad"]
    tree = _parse(text)
    (fault,) = _with(tree, "tr", "at-fault")
    assert report["shape_trace"]["at_fault"] == "classifier.1"
    body = "".join(tree.text)
    assert "classifier.1" in body and "(4, 294)" in body and "weight (32, 216)" in body
    assert "mat1 and mat2 shapes cannot be multiplied" in body
    assert "No forward raised in this run." in pages["tl002_bad"][1]


# -- in a real browser ------------------------------------------------------------------------------------

_CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
                  if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(
    _CHROMIUM is None, reason="no Chromium here: `apt-get install -y chromium` (Debian/Ubuntu) installs it; the test "
    "does not install it itself (root and the network, ~70 s)")

# Measures what the browser drew, once the page has loaded, into the DOM that --dump-dom prints.
_PROBE = """<script>
addEventListener('load', () => {
  const box = e => { const b = e.getBBox(); return [Math.round(b.width), Math.round(b.height)]; };
  const charts = [...document.querySelectorAll('svg.chart')].map(svg => ({
    id: svg.id, width: Math.round(svg.getBoundingClientRect().width),
    curves: [...svg.querySelectorAll('path.curve')].map(p => ({module: p.dataset.module, box: box(p),
                                                                length: Math.round(p.getTotalLength())})),
    bands: [...svg.querySelectorAll('rect[class^=band]')].map(r => ({cls: r.getAttribute('class'), box: box(r)})),
    memory: [...svg.querySelectorAll('path.memory-line')].map(p => box(p)),
    slope: [...svg.querySelectorAll('line.slope')].map(l => Math.round(l.getTotalLength())),
    labels: [...svg.querySelectorAll('text')].map(t => t.textContent),
  }));
  const cards = [...document.querySelectorAll('.finding')].map(c => ({
    code: c.dataset.code, status: c.dataset.status, visible: c.getBoundingClientRect().height > 20,
    badge: getComputedStyle(c.querySelector('.badge')).backgroundColor}));
  const fault = document.querySelector('tr.at-fault');
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({charts, cards, fault: fault && fault.innerText,
                                    fonts: document.fonts.status, width: document.body.scrollWidth});
  document.body.appendChild(out);
});
</script>"""


def _render(page: Path, tmp_path: Path) -> dict:
    probe = tmp_path / (page.stem + "-probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    result = subprocess.run([_CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,1400",
                             "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert found, result.stderr[-2000:]
    return json.loads(unescape(found.group(1)))


@needs_chromium
def test_charts_render_in_a_headless_browser(pages, tmp_path):
    report, _, page = pages["tl003_bad"]
    drawn = _render(page, tmp_path)
    charts = {c["id"]: c for c in drawn["charts"]}
    gradients, memory = charts["chart-gradients"], charts["chart-memory"]
    assert gradients["width"] >= 600 and drawn["width"] <= 1100  # fits the window: no horizontal scroll
    assert len(gradients["curves"]) == 2 and all(c["box"][0] > 500 and c["length"] > 500 for c in gradients["curves"])
    assert {b["cls"] for b in gradients["bands"]} == {"band-vanishing", "band-exploding"}
    assert all(b["box"][0] > 500 and b["box"][1] > 5 for b in gradients["bands"])
    assert "exploding > 1e+03" in gradients["labels"] and "optimizer step" in gradients["labels"]
    assert memory["memory"][0][0] > 500 and memory["memory"][0][1] > 100  # a rising line across the plot
    assert memory["slope"][0] > 500
    assert drawn["cards"] == [{"code": "TL003", "status": "CONFIRMED", "visible": True, "badge": "rgb(214, 39, 40)"}]


@needs_chromium
def test_shape_trace_and_findings_render_in_a_headless_browser(pages, tmp_path):
    drawn = _render(pages["tl301_layer_bad"][2], tmp_path)
    assert drawn["fault"].split("\t")[:3] == ["classifier.1", "Linear", "(4, 294)"]
    assert drawn["cards"][0]["code"] == "TL301" and drawn["cards"][0]["visible"]
    drawn = _render(pages["tl107_grad_bad"][2], tmp_path)
    assert {(c["code"], c["status"]) for c in drawn["cards"]} == {("TL106", "CONFIRMED"), ("TL107", "CONFIRMED")}


@needs_chromium
def test_screenshot(pages, tmp_path):
    """A screenshot of one report: a PNG of the window's size, not blank (a blank page compresses
    to a few hundred bytes)."""
    shot = tmp_path / "report.png"
    subprocess.run([_CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,1800", f"--screenshot={shot}",
                    pages["tl107_grad_bad"][2].as_uri()], capture_output=True, timeout=120)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1100, 1800)
    assert len(data) > 50_000
    target = os.environ.get("TORCHLINT_HTML_SCREENSHOT")  # keep it to look at
    if target:
        shutil.copy(shot, target)


def test_nan_gradients_are_marked_on_the_chart(pages):
    report, text, _ = pages["health_report"]
    tree = _parse(text)
    crosses = _with(tree, "text", "nonfinite")
    assert len(crosses) == 4  # `body` and `used` at steps 3 and 4
    assert "grad None ×8" in "".join(tree.text)  # `unused`: no curve, its row says why
