"""The report of `torchlint run` in the usual formats: concise/full/grouped (text with the
gradient-health and memory sections), json (one object), json-lines (one finding a line),
github (workflow annotations) and sarif (SARIF 2.1.0, statuses and evidence in `properties`)."""

from __future__ import annotations

import json
import linecache
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, TextIO, Tuple

from torchlint.runtime import signatures
from torchlint.runtime.graph import mib
from torchlint.runtime.project import display_path
from torchlint.runtime.reconcile import FOUND_BY_RUN, Result, counts


@dataclass
class RunReport:
    target: str
    outcome: str  # launcher kind
    reason: str
    seconds: float
    steps: int
    results: List[Result]
    health: List[Any]  # HealthRow
    health_steps: int
    samples: List[Any]  # memory Sample
    growth: Optional[str]
    growth_explained_by: List[str]
    traceback: Optional[str]
    exit_code: int
    internal_errors: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)  # files that could not be linted, what was not watched
    thresholds: Dict[str, float] = field(default_factory=dict)
    uses_cuda: bool = False
    environment: Dict[str, Any] = field(default_factory=dict)
    saved_tensors_every: int = 1  # the saved-tensor hooks were on in one step of this many
    # the error that ended the run as the findings' evidence quotes it (`IndexError: invalid index
    # of a 0-dim tensor...`): the text report, which shows the traceback, does not print it twice
    error_quoted: Tuple[str, ...] = ()
    frozen: List[str] = field(default_factory=list)  # parameters an optimizer holds with requires_grad=False
    # the shape trace of a forward that raised (runtime/shapes.py: ShapeTrace), for the HTML report
    shape_trace: Any = None


_ANSI = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def strip_ansi(text: Optional[str]) -> Optional[str]:
    """`text` without terminal escape sequences (colours, cursor moves, hyperlinks)."""
    return _ANSI.sub("", text) if text and "\x1b" in text else text


def clean_report(report: RunReport) -> None:
    """Remove the escape codes torch's own messages may carry (coloured compiler errors, a
    warning formatted for a terminal) from everything the report quotes: for files, pipes and
    machine formats."""
    report.reason = strip_ansi(report.reason) or ""
    report.traceback = strip_ansi(report.traceback)
    report.notes = [strip_ansi(n) or "" for n in report.notes]
    report.internal_errors = [strip_ansi(n) or "" for n in report.internal_errors]
    report.error_quoted = tuple(strip_ansi(q) or "" for q in report.error_quoted)
    for result in report.results:
        result.message = strip_ansi(result.message) or ""
        result.evidence = strip_ansi(result.evidence) or ""
    if report.shape_trace is not None:
        report.shape_trace.error = strip_ansi(report.shape_trace.error) or ""


def _where(result: Result) -> str:
    column = f":{result.column}" if result.column else ""
    return f"{display_path(result.path)}:{result.line}{column}"


def _status_word(result: Result) -> str:
    return "" if result.status == FOUND_BY_RUN else f"{result.status} "


def _severity(result: Result) -> Optional[str]:
    """The severity the run measured (TL003: what the retained graphs hold), else the static
    finding's (`error`, `warning`, `note`); None for what only the run found without one."""
    measured = getattr(result.observation, "severity", None)
    if measured:
        return measured
    severity = getattr(getattr(result.static, "finding", None), "severity", None)
    return severity.value if severity is not None else None


# -- text -------------------------------------------------------------------------------------------

def write_text(report: RunReport, stream: TextIO, options: dict) -> None:
    full = options.get("format") == "full"
    grouped = options.get("format") == "grouped"
    write = stream.write
    reason = report.reason
    if report.traceback and report.outcome == "failed":  # the error is the traceback's last line: once is enough
        reason = reason.split(": ", 1)[0] + " (traceback below)"
    write(f"torchlint run {report.target}: {reason} ({report.seconds:.2f} s, {report.steps} optimizer "
          f"step{'s' if report.steps != 1 else ''})\n")
    if report.traceback:
        write("\n" + report.traceback + "\n")
        shape = shape_line(report.shape_trace)
        if shape:
            write(shape + "\n")
    if report.results:
        write("\n")
    current_file = None
    for result in report.results:
        if grouped and result.path != current_file:
            current_file = result.path
            write(f"{display_path(result.path)}:\n")
        prefix = "  " if grouped else ""
        where = f"{result.line}{':' + str(result.column) if result.column else ''}" if grouped else _where(result)
        origin = " (found by the run)" if result.status == FOUND_BY_RUN else ""
        severity = f"{_severity(result)}: " if _severity(result) else ""  # `TL002 CONFIRMED error: ...`
        write(f"{prefix}{where}: {result.code} {_status_word(result)}{severity}{result.message}{origin}\n")
        if result.evidence:
            count = result.observation.count if result.observation is not None else 1
            repeat = f" (×{count})" if count > 1 else ""
            write(f"{prefix}    evidence: {_evidence_text(report, result)}{repeat}\n")
        if full:
            text = linecache.getline(result.path, result.line).rstrip()
            if text:
                write(f"{prefix}    {result.line} | {text}\n")
    write("\n")
    _write_health(report, write)
    _write_memory(report, write)
    for note in report.notes:
        write(f"note: {note}\n")
    for error in report.internal_errors:
        write(f"torchlint run: instrumentation error (please report): {error}\n")
    confirmed, run_only, harmless, unreached, unknown = counts(report.results)
    parts = [f"{confirmed} static finding{'s' if confirmed != 1 else ''} confirmed",
             f"{run_only} found by the run only", f"{harmless} ran without harm", f"{unreached} not reached"]
    if unknown:
        parts.append(f"{unknown} with no evidence")
    write("; ".join(parts) + f". Exit status {report.exit_code}.\n")


def _evidence_text(report: RunReport, result: Result) -> str:
    """The evidence, with the error that ended the run (already shown in the traceback above)
    referred to rather than printed again."""
    evidence = result.evidence
    if not (report.traceback and result.observation is not None and result.observation.ended_run):
        return evidence
    for quoted in report.error_quoted:
        if quoted and quoted in evidence:
            return evidence.replace(quoted, "the error in the traceback above", 1)
    return evidence


def _write_health(report: RunReport, write) -> None:
    rows = report.health
    if not rows:
        write("Gradient health: no optimizer step ran, nothing to show.\n\n")
        return
    steps = report.health_steps
    write(f"Gradient health (after step{'s 1–' + str(steps) if steps > 1 else ' 1'}, {len(rows)} parameters; "
          f"vanishing < {report.thresholds.get('vanishing', 0):g}, exploding > "
          f"{report.thresholds.get('exploding', 0):g})\n")
    bad = [r for r in rows if r.problems]
    shown = bad if bad else rows[:8]
    width = max([len(r.name) for r in shown] + [9])
    write(f"  {'parameter':<{width}}  {'grad None':>9} {'NaN/Inf':>7} {'zero':>5} {'vanishing':>9} "
          f"{'exploding':>9}  ‖grad‖ min … max\n")
    for row in shown:
        finite = [n for n in row.norms if math.isfinite(n)]
        span = f"{min(finite):.3g} … {max(finite):.3g}" if finite else "–"
        write(f"  {row.name:<{width}}  {row.none:>9} {row.nonfinite:>7} {row.zero:>5} {row.vanishing:>9} "
              f"{row.exploding:>9}  {span}\n")
    if bad:
        healthy = len(rows) - len(bad)
        if healthy:
            write(f"  ... and {healthy} healthy parameter{'s' if healthy != 1 else ''}\n")
    else:
        more = len(rows) - len(shown)
        write(f"  all {len(rows)} parameters healthy" + (f" ({more} not shown)" if more else "") + "\n")
    for line in health_notes(report):
        write(f"  note: {line}\n")
    write("\n")


def shape_line(trace: Any) -> str:
    """One line of the shape trace of a failed forward for the text report: the module at fault,
    what it was given, its parameters' shapes (the HTML report has the whole table)."""
    if trace is None:
        return ""
    entry = next((e for e in trace.entries if e.raised and e.module == trace.at_fault), None)
    if entry is None:
        return ""
    given = f" on input {', '.join(entry.inputs)}" if entry.inputs else ""
    params = f"; {', '.join(f'{n} {s}' for n, s in entry.parameters)}" if entry.parameters else ""
    path = " ← ".join(e.module for e in trace.entries if e.raised)
    return f"shape trace: `{entry.module}` ({entry.kind}) raised{given}{params} (in {path})"


def health_notes(report: RunReport) -> List[str]:
    """What the health table leaves out on purpose, and why (biases feeding a BatchNorm, frozen
    parameters)."""
    notes = []
    fed = [r for r in report.health if getattr(r, "feeds_batchnorm", None) and getattr(r, "by_construction", 0)]
    if fed:
        names = ", ".join(f"`{r.name}` (→ `{r.feeds_batchnorm}`)" for r in fed[:6])
        more = f" and {len(fed) - 6} more" if len(fed) > 6 else ""
        notes.append(f"{names}{more}: a bias feeding a BatchNorm has a zero gradient by construction (the "
                     "BatchNorm subtracts the batch mean), not a vanishing one; `bias=False` on that layer saves it")
    if report.frozen:
        names = ", ".join(f"`{n}`" for n in report.frozen[:4])
        more = f" and {len(report.frozen) - 4} more" if len(report.frozen) > 4 else ""
        notes.append(f"{len(report.frozen)} parameter{'s' if len(report.frozen) != 1 else ''} frozen on purpose "
                     f"(requires_grad=False) left out: {names}{more}")
    return notes


def _write_memory(report: RunReport, write) -> None:
    samples = report.samples
    if not samples:
        write("Memory per step: no optimizer step ran, nothing to show.\n\n")
        return
    cuda = report.uses_cuda and all(s.cuda_allocated is not None for s in samples)
    measure = "CUDA memory allocated" if cuda else "saved tensors held by live autograd graphs"
    values = [s.cuda_allocated if cuda else s.saved_bytes for s in samples]
    every = report.saved_tensors_every
    if not cuda and every > 1:
        measure += (f"; counting the graphs of one step in {every} from step 3 on, where the saved-tensor hooks "
                    "would cost more than a tenth of a step: --saved-tensors-every 1 counts every step")
    write(f"Memory per step ({measure})\n")
    if len(values) <= 10:
        write("  " + ", ".join(f"{s.step}: {mib(v)}" for s, v in zip(samples, values)) + "\n")
    else:
        head = ", ".join(f"{s.step}: {mib(v)}" for s, v in zip(samples[:4], values[:4]))
        tail = ", ".join(f"{s.step}: {mib(v)}" for s, v in zip(samples[-3:], values[-3:]))
        write(f"  {head}, …, {tail} (max {mib(max(values))})\n")
    if report.growth:
        explained = f"; explained by {', '.join(report.growth_explained_by)}" if report.growth_explained_by else \
            "; no detector explains it"
        write(f"  steady growth: {report.growth}{explained}\n\n")
    else:
        write("  no steady growth\n\n")


# -- json ---------------------------------------------------------------------------------------------

def result_json(result: Result) -> dict:
    from torchlint.rules import get_rule

    rule = get_rule(result.code)
    observation = result.observation
    return {
        "code": result.code,
        "title": signatures.title(result.code),
        "status": result.status,
        "severity": _severity(result),
        "filename": display_path(result.path),
        "location": {"row": result.line, "column": result.column},
        "message": result.message,
        "evidence": result.evidence or None,
        "count": observation.count if observation is not None else 0,
        "first_step": observation.step if observation is not None else None,
        "ended_run": observation.ended_run if observation is not None else False,
        "source": "run" if result.static is None else "static",
        "url": rule.url() if rule is not None else None,
    }


def report_json(report: RunReport) -> dict:
    return {
        "version": 1,
        "script": report.target,
        "environment": report.environment,
        "outcome": {"kind": report.outcome, "reason": report.reason, "seconds": round(report.seconds, 3),
                    "optimizer_steps": report.steps, "traceback": report.traceback},
        "findings": [result_json(r) for r in report.results],
        "gradient_health": {"steps": report.health_steps, "thresholds": report.thresholds,
                            "parameters": [row.to_json() for row in report.health], "frozen": report.frozen,
                            "notes": health_notes(report)},
        "memory": {"samples": [{"step": s.step, "saved_bytes": s.saved_bytes, "saved_tensors": s.saved_tensors,
                                "cuda_allocated": s.cuda_allocated} for s in report.samples],
                   "saved_tensors_every": report.saved_tensors_every,
                   "growth": report.growth, "explained_by": report.growth_explained_by},
        "shape_trace": report.shape_trace.to_json() if report.shape_trace is not None else None,
        "notes": report.notes,
        "internal_errors": report.internal_errors,
        "exit_code": report.exit_code,
    }


def write_json(report: RunReport, stream: TextIO, options: dict) -> None:
    json.dump(report_json(report), stream, indent=2, ensure_ascii=False)
    stream.write("\n")


def write_json_lines(report: RunReport, stream: TextIO, options: dict) -> None:
    for result in report.results:
        stream.write(json.dumps(result_json(result), ensure_ascii=False) + "\n")


# -- github ---------------------------------------------------------------------------------------------

def write_github(report: RunReport, stream: TextIO, options: dict) -> None:
    from torchlint.output.github import escape_data, escape_property

    for result in report.results:
        command = "warning" if result.harmful else "notice"
        text = f"{result.status}: {result.message}" + (f" — {result.evidence}" if result.evidence else "")
        properties = [("file", display_path(result.path)), ("line", str(result.line)),
                      ("title", f"torchlint run ({result.code})")]
        rendered = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
        stream.write(f"::{command} {rendered}::{escape_data(text)}\n")


# -- sarif ----------------------------------------------------------------------------------------------

def write_sarif(report: RunReport, stream: TextIO, options: dict) -> None:
    from torchlint.output.sarif import artifact_uri, related_locations, rule_descriptors, sarif_log

    root = Path(options.get("root") or Path.cwd())
    log = sarif_log([], root)
    driver = log["runs"][0]["tool"]["driver"]
    rules = rule_descriptors()
    known = {rule["id"] for rule in rules}
    for code, entry in sorted(signatures.CODES.items()):
        if code not in known:
            text = f"{entry.title} (recognised at run time by: {entry.recognised_by})"
            rules.append({"id": code, "name": entry.title, "shortDescription": {"text": entry.title},
                          "fullDescription": {"text": text}, "help": {"text": text, "markdown": text},
                          "defaultConfiguration": {"level": "warning"}})
    driver["rules"] = rules
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    results = []
    for result in report.results:
        item = {
            "ruleId": result.code,
            "level": "warning" if result.harmful else "note",
            "message": {"text": f"{result.status}: {result.message}"
                        + (f" Evidence: {result.evidence}" if result.evidence else "")},
            "locations": [{"physicalLocation": {
                "artifactLocation": artifact_uri(result.path, root),
                "region": {"startLine": result.line, **({"startColumn": result.column} if result.column else {})},
            }}],
            "properties": {"status": result.status, "severity": _severity(result),
                           "evidence": result.evidence or None},
        }
        static = getattr(result.static, "finding", None)
        if static is not None and static.related:
            item["relatedLocations"] = related_locations(static, root)  # `Net` (model.py:4)
        if result.code in index:
            item["ruleIndex"] = index[result.code]
        results.append(item)
    log["runs"][0]["results"] = results
    json.dump(log, stream, indent=2, ensure_ascii=False)
    stream.write("\n")


WRITERS = {
    "concise": write_text, "full": write_text, "grouped": write_text, "json": write_json,
    "json-lines": write_json_lines, "github": write_github, "sarif": write_sarif,
}