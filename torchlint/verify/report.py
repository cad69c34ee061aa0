"""Render a verification report (the dict `runner.run_cases` returns) as text or JSON."""

from __future__ import annotations

import json
import textwrap

from torchlint.verify.runner import API_CHANGE_PROBE, SOURCE_CHECKED, VERDICTS


def render_json(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def _environment_lines(env: dict) -> list:
    cuda_version = env.get("cuda_version") or "none (CPU-only build)"
    cuda = {True: "yes", False: "no", None: "unknown"}[env.get("cuda_available")]
    lines = [f"torchlint {env.get('torchlint')} --verify · torch {env.get('torch')} · "
             f"Python {env.get('python')} · CUDA available: {cuda} · CUDA version: {cuda_version}"]
    for device, info in (env.get("devices") or {}).items():
        if info.get("available") is False:
            lines.append(f"  {device}: not available")
            continue
        if info.get("available") is None:
            lines.append(f"  {device}: no child process started")
            continue
        extra = ""
        if device == "cpu":
            extra = f" · {info.get('cpu_count')} cores, {info.get('torch_threads')} torch threads"
        lines.append(f"  {device}: {info.get('name')} · {info.get('memory_gb')} GB memory{extra}"
                     f" · child ready in {info.get('startup_seconds')} s")
    lines.append(f"  static analyzer: {env.get('analyzer')}")
    return lines


def _api_table_lines(report: dict) -> list:
    """Which torch the API-change table's claims were checked on, when its entries ran."""
    rows = [row for row in report["results"] if row.get("probe") == API_CHANGE_PROBE]
    if not rows:
        return []
    from torchlint.analysis.api_changes import CHECKED_ON

    source = sum(1 for row in rows if row["verdict"] == SOURCE_CHECKED)
    on = f"torch {report['environment'].get('torch')}"
    line = (f"  API-change table: {len(rows) - source} entries' claims checked on {on} (this run), "
            f"{source} source-checked; the table records {CHECKED_ON}")
    if CHECKED_ON != on:
        line += " — a different torch: REFUTED rows are claims this torch contradicts"
    return [line]


def _signature_table_lines(report: dict) -> list:
    """Which torch the signature table (TL216) was made from, when its check ran."""
    if not any(row.get("probe") == "signature_table" for row in report["results"]):
        return []
    from torchlint.analysis.api_changes import signatures

    made = f"torch {signatures.torch_version()}"
    on = f"torch {report['environment'].get('torch')}"
    line = f"  signature table: made from {made}, compared with {on} (this run)"
    if made != on:
        line += " — a different torch: a REFUTED row names the entries that changed"
    return [line]


def _wrap(prefix: str, text: str, width: int = 110) -> list:
    indent = " " * len(prefix)
    return textwrap.wrap(text, width=width, initial_indent=prefix, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [prefix.rstrip()]


def render_text(report: dict) -> str:
    lines = _environment_lines(report["environment"])
    lines.extend(_api_table_lines(report))
    lines.extend(_signature_table_lines(report))
    lines.append("")
    width = max([10] + [len(row["rule"]) + 1 for row in report["results"]])
    header = f"{'RULE':<{width}} {'DEVICE':<6} {'VERDICT':<13} {'STATIC':<11} CASE"
    lines.append(header)
    lines.append("-" * len(header))
    pad = " " * (width + 1)
    for row in report["results"]:
        lines.append(f"{row['rule']:<{width}} {row['device']:<6} {row['verdict']:<13} "
                     f"{row['static']['status']:<11} {row['title']}")
        claim = row["kind"] == "claim"
        bad_label, good_label = ("claim", "control") if claim else ("bad", "good")
        if row["bad"] is not None:
            bad = row["bad"]
            state = ("harm" if bad["harm"] else "no harm") if not claim else \
                ("holds" if bad["harm"] else "refuted")
            lines.extend(_wrap(f"{pad}{bad_label:<7} → {state}: ", bad["evidence"]))
        if row["good"] is not None:
            good = row["good"]
            state = ("HARM" if good["harm"] else "clean") if not claim else \
                ("harm seen" if good["harm"] else "NO HARM")
            lines.extend(_wrap(f"{pad}{good_label:<7} → {state}: ", good["evidence"]))
        if row["static"]["status"] not in ("ok", "n/a"):
            lines.extend(_wrap(f"{pad}static  : ", row["static"]["detail"]))
        if row["reason"]:
            lines.extend(_wrap(f"{pad}reason  : ", row["reason"]))
    lines.append("")
    counts = ", ".join(f"{report['summary'][v]} {v}" for v in VERDICTS if report["summary"].get(v))
    lines.append(f"{len(report['results'])} results: {counts or 'nothing run'} "
                 f"in {report['wall_seconds']} s")
    return "\n".join(lines) + "\n"
