"""`torchlint run --html report.html`: the run's report as one self-contained HTML file.

No network and no external assets: the styles are inline, the charts inline SVG drawn here, and
there is no script. It holds the findings with their source lines and evidence, the gradient norm
of each layer over the watched steps (log scale, with the vanishing and exploding bands; the
parameters of a module are one curve, the top `TOP_LAYERS` layers drawn and every layer in a
table), the memory per step with the least-squares growth slope, and the shape trace of a forward
that raised (`RunReport.shape_trace`, see runtime/shapes.py). The elements a test or a reader
looks for carry ids and classes: `#findings`, `#gradients` (`svg.chart-gradients`, `path.curve`,
`rect.band-vanishing`, `rect.band-exploding`), `#memory` (`svg.chart-memory`, `path.memory-line`,
`line.slope`), `#shape-trace` (`tr.at-fault`).
"""

from __future__ import annotations

import html
import linecache
import math
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from torchlint.runtime.graph import mib
from torchlint.runtime.project import display_path
from torchlint.runtime.reconcile import CONFIRMED, FOUND_BY_RUN, NO_EVIDENCE, NOT_REACHED, RAN_WITHOUT_HARM, counts

TOP_LAYERS = 8  # curves drawn; the rest are in the table below the chart
CONTEXT_LINES = 2  # source lines shown around a finding's line
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22")
STATUS_CLASS = {CONFIRMED: "confirmed", FOUND_BY_RUN: "confirmed", RAN_WITHOUT_HARM: "harmless",
                NOT_REACHED: "unreached", NO_EVIDENCE: "unknown"}

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid #d8dce3;padding-bottom:4px}
.sub{color:#5b6473}.summary span{display:inline-block;margin:6px 8px 0 0;padding:2px 9px;border-radius:10px;background:#e8ebf0}
.card{background:#fff;border:1px solid #dde1e7;border-left:5px solid #8a94a6;border-radius:6px;padding:10px 14px;margin:10px 0}
.card.confirmed{border-left-color:#d62728}.card.harmless{border-left-color:#2ca02c}.card.unreached{border-left-color:#a0a7b4}
.card.unknown{border-left-color:#e0a800}.badge{font-weight:600;font-size:12px;padding:1px 7px;border-radius:9px;color:#fff;background:#8a94a6}
.confirmed .badge{background:#d62728}.harmless .badge{background:#2ca02c}.unknown .badge{background:#b8860b}
.code{font-weight:700}.where{font-family:ui-monospace,Menlo,Consolas,monospace;color:#3b4452}
.evidence{margin:6px 0 0;padding:6px 9px;background:#f3f5f8;border-radius:4px}
pre{font:12.5px/1.4 ui-monospace,Menlo,Consolas,monospace;background:#1f2430;color:#e6e9ef;padding:8px 10px;border-radius:5px;overflow:auto}
pre .hit{background:#5a2a2a;display:inline-block;width:100%}
svg{background:#fff;border:1px solid #dde1e7;border-radius:6px;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#3b4452}
table{border-collapse:collapse;background:#fff;font-size:13px}td,th{border:1px solid #dde1e7;padding:3px 8px;text-align:left}
th{background:#eef1f5}tr.at-fault td{background:#fde2e2;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.legend span{display:inline-block;margin:4px 12px 0 0}.swatch{display:inline-block;width:14px;height:3px;vertical-align:middle;margin-right:5px}
.note{color:#5b6473}details{margin-top:8px}
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _fmt(value: float) -> str:
    return f"{value:.3g}"


# -- the page ---------------------------------------------------------------------------------------

def write_html(report: Any, stream: TextIO, options: Optional[dict] = None) -> None:
    confirmed, run_only, harmless, unreached, unknown = counts(report.results)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>torchlint run {_e(report.target)}</title><style>{_STYLE}</style></head><body><main>",
        f"<h1>torchlint run <span class=\"where\">{_e(report.target)}</span></h1>",
        f'<div class="sub" id="outcome">{_e(report.reason)} — {report.seconds:.2f} s, {report.steps} optimizer '
        f"step{'s' if report.steps != 1 else ''}, exit status {report.exit_code}"
        + (f" · torch {_e(report.environment.get('torch'))}" if report.environment.get("torch") else "") + "</div>",
        '<div class="summary">'
        f"<span>{confirmed} confirmed</span><span>{run_only} found by the run only</span>"
        f"<span>{harmless} ran without harm</span><span>{unreached} not reached</span>"
        + (f"<span>{unknown} no evidence</span>" if unknown else "") + "</div>",
    ]
    parts.append(_findings(report))
    parts.append(_gradients(report))
    parts.append(_memory(report))
    parts.append(_shape_trace(report))
    if report.traceback:
        parts.append(f'<h2 id="traceback">Traceback</h2><pre>{_e(report.traceback)}</pre>')
    notes = list(report.notes) + [f"instrumentation error (please report): {e}" for e in report.internal_errors]
    if notes:
        parts.append('<h2 id="notes">Notes</h2><ul>' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    parts.append("</main></body></html>\n")
    stream.write("\n".join(parts))


def _findings(report: Any) -> str:
    out = ['<section id="findings"><h2>Findings</h2>']
    if not report.results:
        out.append('<p class="note">No finding: nothing static to confirm and nothing found by the run.</p>')
    for result in report.results:
        status = result.status
        severity = _severity(result)
        column = f":{result.column}" if result.column else ""
        count = result.observation.count if result.observation is not None else 1
        out.append(f'<div class="card finding {STATUS_CLASS.get(status, "")}" data-code="{_e(result.code)}" '
                   f'data-status="{_e(status)}">')
        out.append(f'<span class="code">{_e(result.code)}</span> <span class="badge">{_e(status)}</span> '
                   + (f"<b>{_e(severity)}</b> " if severity else "")
                   + f'<span class="where">{_e(display_path(result.path))}:{result.line}{column}</span>'
                   + (f' <span class="note">×{count}</span>' if count > 1 else ""))
        out.append(f"<div>{_e(result.message)}</div>")
        if result.evidence:
            out.append(f'<div class="evidence"><b>evidence:</b> {_e(result.evidence)}</div>')
        source = _source(result.path, result.line)
        if source:
            out.append(f"<pre>{source}</pre>")
        out.append("</div>")
    out.append("</section>")
    return "\n".join(out)


def _severity(result: Any) -> Optional[str]:
    from torchlint.runtime.report import _severity as severity

    return severity(result)


def _source(path: str, line: int) -> str:
    rows = []
    for number in range(max(line - CONTEXT_LINES, 1), line + CONTEXT_LINES + 1):
        text = linecache.getline(path, number)
        if not text and number > line:
            break
        body = f"{number:>5} | {_e(text.rstrip())}"
        rows.append(f'<span class="hit">{body}</span>' if number == line else body)
    return "\n".join(rows) if any(linecache.getline(path, line)) else ""


# -- gradient norms ------------------------------------------------------------------------------------

def layer_curves(rows: Sequence[Any]) -> List[Tuple[str, List[Tuple[int, float]], Dict[str, Any]]]:
    """(module, [(step, ‖grad‖ of its parameters together)], facts) for each module: the norm of
    the concatenated gradients of its own parameters (weight and bias), per watched step."""
    groups: Dict[str, List[Any]] = {}
    for row in rows:
        module = row.name.rsplit(".", 1)[0] if "." in row.name else "(model)"
        groups.setdefault(module, []).append(row)
    curves = []
    for module, members in groups.items():
        by_step: Dict[int, float] = {}
        for row in members:
            if getattr(row, "feeds_batchnorm", None):
                continue  # zero by construction: it says nothing of the layer's health
            for step, norm in zip(getattr(row, "steps_seen", []) or range(1, len(row.norms) + 1), row.norms):
                by_step[step] = by_step.get(step, 0.0) + (norm * norm if math.isfinite(norm) else math.inf)
        points = sorted((step, math.sqrt(total)) for step, total in by_step.items())
        facts = {"parameters": len(members), "problems": sum(r.problems for r in members),
                 "none": sum(r.none for r in members), "nonfinite": sum(r.nonfinite for r in members)}
        curves.append((module, points, facts))
    return curves


def top_layers(curves: Sequence[Tuple[str, List[Tuple[int, float]], Dict[str, Any]]], k: int = TOP_LAYERS):
    """The k layers worth drawing: those with problems first, then the extremes (largest and
    smallest norms), then the rest by their largest norm."""
    def finite(points):
        return [v for _, v in points if math.isfinite(v) and v > 0]

    drawable = [c for c in curves if finite(c[1]) or any(not math.isfinite(v) for _, v in c[1])]
    chosen: List[Any] = [c for c in drawable if c[2]["problems"]][:k]
    by_max = sorted(drawable, key=lambda c: -max(finite(c[1]), default=0.0))
    by_min = sorted(drawable, key=lambda c: min(finite(c[1]), default=math.inf))
    for pool in (by_max[:1], by_min[:1], by_max):
        for curve in pool:
            if len(chosen) >= k:
                break
            if curve not in chosen:
                chosen.append(curve)
    return chosen


def _gradients(report: Any) -> str:
    from torchlint.runtime.report import health_notes

    out = ['<section id="gradients"><h2>Gradient norms per layer</h2>']
    rows = list(report.health)
    curves = layer_curves(rows)
    shown = top_layers(curves)
    if not shown:
        out.append('<p class="note">No optimizer step ran with gradients: nothing to draw.</p>')
    else:
        vanishing = report.thresholds.get("vanishing", 1e-7)
        exploding = report.thresholds.get("exploding", 1e3)
        out.append(f'<p class="note">‖grad‖ of each layer (its parameters together) after each watched step, log '
                   f"scale; below {_fmt(vanishing)} vanishing, above {_fmt(exploding)} exploding. "
                   f"{len(shown)} of {len(curves)} layers drawn (problems first, then the extremes).</p>")
        out.append(_norm_chart(shown, vanishing, exploding))
        out.append('<div class="legend">' + "".join(
            f'<span data-module="{_e(name)}"><i class="swatch" style="background:{PALETTE[i % len(PALETTE)]}"></i>'
            f"{_e(name)}</span>" for i, (name, _, _) in enumerate(shown)) + "</div>")
    if curves:
        out.append(f"<details{' open' if len(curves) <= 12 else ''}><summary>All {len(curves)} layers</summary>"
                   "<table class=\"layers\"><tr><th>layer</th><th>parameters</th><th>‖grad‖ min</th>"
                   "<th>‖grad‖ max</th><th>last</th><th>problems</th></tr>")
        for name, points, facts in sorted(curves, key=lambda c: (-c[2]["problems"], c[0])):
            values = [v for _, v in points]
            finite = [v for v in values if math.isfinite(v)]
            cells = [_fmt(min(finite)) if finite else "–", _fmt(max(finite)) if finite else "–",
                     (_fmt(values[-1]) if math.isfinite(values[-1]) else "NaN/Inf") if values else "–"]
            problem = []
            if facts["none"]:
                problem.append(f"grad None ×{facts['none']}")
            if facts["nonfinite"]:
                problem.append(f"NaN/Inf ×{facts['nonfinite']}")
            if facts["problems"] and not problem:
                problem.append(f"{facts['problems']} step(s) out of range")
            out.append(f"<tr><td>{_e(name)}</td><td class=\"num\">{facts['parameters']}</td>"
                       + "".join(f'<td class="num">{c}</td>' for c in cells) + f"<td>{_e(', '.join(problem))}</td></tr>")
        out.append("</table></details>")
    for note in health_notes(report):
        out.append(f'<p class="note">{_e(note)}</p>')
    out.append("</section>")
    return "\n".join(out)


def _norm_chart(curves, vanishing: float, exploding: float) -> str:
    width, height, left, right, top, bottom = 760, 320, 64, 16, 14, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _, points, _ in curves for _, v in points if math.isfinite(v) and v > 0] or [1.0]
    steps = sorted({s for _, points, _ in curves for s, _ in points})
    low = math.floor(math.log10(min(values + [vanishing]))) - 1
    high = math.ceil(math.log10(max(values + [exploding]))) + 1
    first, last = steps[0], steps[-1]

    def x(step: float) -> float:
        return left + (plot_w * (step - first) / (last - first) if last > first else plot_w / 2)

    def y(value: float) -> float:
        value = min(max(value, 10.0 ** low), 10.0 ** high)
        return top + plot_h * (high - math.log10(value)) / (high - low)

    out = [f'<svg class="chart chart-gradients" id="chart-gradients" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="gradient norm per layer and step">']
    out.append(f'<rect class="band-exploding" x="{left}" y="{top}" width="{plot_w}" height="{y(exploding) - top:.1f}" '
               f'fill="#d62728" fill-opacity="0.10"><title>exploding: ‖grad‖ above {_fmt(exploding)}</title></rect>')
    out.append(f'<rect class="band-vanishing" x="{left}" y="{y(vanishing):.1f}" width="{plot_w}" '
               f'height="{top + plot_h - y(vanishing):.1f}" fill="#1f77b4" fill-opacity="0.10">'
               f"<title>vanishing: ‖grad‖ below {_fmt(vanishing)}</title></rect>")
    out.append(f'<text x="{left + plot_w - 4}" y="{top + 12}" text-anchor="end">exploding &gt; {_fmt(exploding)}</text>')
    out.append(f'<text x="{left + plot_w - 4}" y="{top + plot_h - 5}" text-anchor="end">vanishing &lt; '
               f"{_fmt(vanishing)}</text>")
    for decade in range(low, high + 1):
        py = y(10.0 ** decade)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{py:.1f}" y2="{py:.1f}" stroke="#e4e7ec"/>')
        if (decade - low) % max(1, (high - low) // 8) == 0:
            out.append(f'<text class="tick-y" x="{left - 6}" y="{py + 4:.1f}" text-anchor="end">1e{decade}</text>')
    for step in _ticks(steps):
        out.append(f'<text class="tick-x" x="{x(step):.1f}" y="{height - 14}" text-anchor="middle">{step}</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 1}" text-anchor="middle">optimizer step</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#9aa3b2"/>')
    for index, (name, points, _) in enumerate(curves):
        color = PALETTE[index % len(PALETTE)]
        drawn = [(s, v) for s, v in points if math.isfinite(v) and v > 0]
        path = " ".join(f"{'M' if i == 0 else 'L'}{x(s):.1f},{y(v):.1f}" for i, (s, v) in enumerate(drawn))
        if drawn:
            out.append(f'<path class="curve" data-module="{_e(name)}" d="{path}" fill="none" stroke="{color}" '
                       f'stroke-width="2"><title>{_e(name)}</title></path>')
        for s, v in drawn:
            out.append(f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}">'
                       f"<title>{_e(name)} step {s}: {_fmt(v)}</title></circle>")
        for s, v in points:  # NaN/Inf: a cross on the top edge, in the layer's colour
            if not math.isfinite(v):
                out.append(f'<text class="nonfinite" x="{x(s):.1f}" y="{top + 12 + 11 * index:.1f}" text-anchor="middle" '
                           f'style="fill:{color};font-weight:700">×<title>{_e(name)} step {s}: NaN/Inf</title></text>')
    out.append("</svg>")
    return "\n".join(out)


def _ticks(steps: List[int], most: int = 12) -> List[int]:
    if len(steps) <= most:
        return steps
    stride = math.ceil(len(steps) / most)
    return steps[::stride] + ([steps[-1]] if (len(steps) - 1) % stride else [])


# -- memory ---------------------------------------------------------------------------------------------

def _memory(report: Any) -> str:
    out = ['<section id="memory"><h2>Memory per step</h2>']
    samples = list(report.samples)
    if not samples:
        out.append('<p class="note">No optimizer step ran: nothing to draw.</p></section>')
        return "\n".join(out)
    cuda = report.uses_cuda and all(s.cuda_allocated is not None for s in samples)
    measure = "CUDA memory allocated" if cuda else "saved tensors held by live autograd graphs"
    values = [(s.step, s.cuda_allocated if cuda else s.saved_bytes) for s in samples]
    slope, intercept = _least_squares(values)
    out.append(f'<p class="note">{_e(measure)} after each step; dashed: the least-squares slope '
               f"({_e(mib(slope) if slope >= 0 else '-' + mib(-slope))} per step).</p>")
    out.append(_memory_chart(values, slope, intercept))
    if report.growth:
        explained = ", ".join(report.growth_explained_by) or "no detector explains it"
        out.append(f'<p id="growth"><b>steady growth:</b> {_e(report.growth)}; {_e(explained)}</p>')
    else:
        out.append('<p id="growth" class="note">no steady growth</p>')
    out.append("</section>")
    return "\n".join(out)


def _least_squares(values: List[Tuple[int, int]]) -> Tuple[float, float]:
    xs = [float(s) for s, _ in values]
    ys = [float(v) for _, v in values]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    denominator = sum((a - mean_x) ** 2 for a in xs)
    if denominator == 0:
        return 0.0, mean_y
    slope = sum((a - mean_x) * (b - mean_y) for a, b in zip(xs, ys)) / denominator
    return slope, mean_y - slope * mean_x


def _memory_chart(values: List[Tuple[int, int]], slope: float, intercept: float) -> str:
    width, height, left, right, top, bottom = 760, 240, 72, 16, 14, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    first, last = values[0][0], values[-1][0]
    peak = max(max(v for _, v in values), 1024)  # at least 1 KiB: an all-zero run keeps readable ticks

    def x(step: float) -> float:
        return left + (plot_w * (step - first) / (last - first) if last > first else plot_w / 2)

    def y(value: float) -> float:
        return top + plot_h * (1 - max(min(value, peak * 1.1), 0) / (peak * 1.1))

    out = [f'<svg class="chart chart-memory" id="chart-memory" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="memory per step">']
    for fraction in (0, 0.25, 0.5, 0.75, 1.0):
        value = peak * 1.1 * fraction
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#e4e7ec"/>')
        out.append(f'<text class="tick-y" x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_e(mib(value))}</text>')
    for step in _ticks([s for s, _ in values]):
        out.append(f'<text class="tick-x" x="{x(step):.1f}" y="{height - 14}" text-anchor="middle">{step}</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 1}" text-anchor="middle">optimizer step</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#9aa3b2"/>')
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(s):.1f},{y(v):.1f}" for i, (s, v) in enumerate(values))
    out.append(f'<path class="memory-line" d="{path}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    for s, v in values:
        out.append(f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="2.5" fill="#1f77b4"><title>step {s}: {_e(mib(v))}'
                   "</title></circle>")
    out.append(f'<line class="slope" x1="{x(first):.1f}" y1="{y(intercept + slope * first):.1f}" x2="{x(last):.1f}" '
               f'y2="{y(intercept + slope * last):.1f}" stroke="#d62728" stroke-width="1.5" stroke-dasharray="6 4">'
               f"<title>slope {_e(mib(abs(slope)))} per step</title></line>")
    out.append("</svg>")
    return "\n".join(out)


# -- the shape trace of a failed forward -----------------------------------------------------------

def _shape_trace(report: Any) -> str:
    trace = getattr(report, "shape_trace", None)
    out = ['<section id="shape-trace"><h2>Shape trace of a failed forward</h2>']
    if trace is None:
        out.append('<p class="note">No forward raised in this run.</p></section>')
        return "\n".join(out)
    scope = ("every module that ran, in call order" if trace.complete
             else "the modules the error went through, innermost first")
    out.append(f"<p><b>{_e(trace.error)}</b></p>")
    out.append(f'<p class="note">In `{_e(trace.model)}`; at fault: <b>{_e(trace.at_fault or "?")}</b>. '
               f"Listed: {_e(scope)}.</p>")
    out.append("<table><tr><th>module</th><th>type</th><th>input shapes</th><th>output shapes</th>"
               "<th>parameters</th></tr>")
    for entry in trace.entries:
        fault = entry.raised and entry.module == trace.at_fault
        params = ", ".join(f"{n} {s}" for n, s in entry.parameters)
        row = '<tr class="at-fault">' if fault else "<tr>"
        out.append(f"{row}<td>{_e(entry.module)}</td>"
                   f"<td title=\"{_e(entry.detail)}\">{_e(entry.kind)}</td><td>{_e(', '.join(entry.inputs))}</td>"
                   f"<td>{_e(', '.join(entry.outputs) or ('raised' if entry.raised else ''))}</td>"
                   f"<td>{_e(params)}</td></tr>")
    out.append("</table></section>")
    return "\n".join(out)
