"""What a run tells the user at the end: the report in the chosen format and the exit code (0
clean, 1 findings, 2 usage/config/internal error). Shared by the lint and fix commands."""

from __future__ import annotations

import os
from pathlib import Path

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def shown(run, results):
    """`results` without the findings below `--min-severity` / `min-severity` (diagnostics are
    errors: always shown). The report and the exit code see only what this keeps."""
    from dataclasses import replace

    level = getattr(run.args, "min_severity", None) or getattr(run.config, "min_severity", None)
    if level is None:
        return results
    from torchlint.finding import Severity

    limit = Severity.parse(level).rank
    kept = [result if all(f.severity.rank <= limit for f in result.findings)
            else replace(result, findings=[f for f in result.findings if f.severity.rank <= limit])
            for result in results]
    below = sum(len(r.findings) for r in results) - sum(len(r.findings) for r in kept)
    if hasattr(run, "below_min_severity"):
        run.below_min_severity = (Severity.parse(level).value, below)
    return kept


def report(run, results, fixed: int = 0, fix_listing=()) -> None:
    """Write the report in the chosen format; the text formats close with a summary that counts
    `fixed` findings and shows `fix_listing` (from `--fix` / `--show-fixes`)."""
    from torchlint.output import writer

    name = run.args.output_format or os.environ.get("TORCHLINT_OUTPUT_FORMAT") or "concise"
    quiet = int(getattr(run.args, "quiet", 0) or 0)
    to_file = bool(getattr(run.args, "output_file", None))
    if quiet >= 2 and not to_file:  # -qq: nothing at all; the exit status says it
        return
    from torchlint.terminal import terminal_width, use_color

    options = {
        "statistics": run.args.statistics,
        "unsafe_fixes": run.args.unsafe_fixes,
        "quiet": quiet,
        "color": use_color(getattr(run.args, "color", None), run.out, name, to_file),
        # wrap long messages (full and grouped only) on a terminal; never in a pipe or a file
        "width": None if to_file else terminal_width(run.out),
        "files": len(results),
        "config": run.config,
        "fixed": fixed,
        "fix_listing": list(fix_listing),
        "below_min_severity": getattr(run, "below_min_severity", ()),
    }
    if name == "full":
        options["sources"] = _sources(run, results)
    # One write: the formats write piece by piece (`json.dump` a few bytes at a time), and with
    # PYTHONUNBUFFERED=1 (common in containers) each piece was a system call of its own.
    import io

    buffer = io.StringIO()
    writer(name)(results, buffer, options)
    run.out.write(buffer.getvalue())


def _sources(run, results) -> dict:
    from torchlint.source import SourceError, decode_source

    sources = {}
    for result in results:
        if not result.findings or result.path.endswith(".ipynb"):
            continue
        try:
            data = run.stdin_source if run.stdin_source is not None else Path(result.path).read_bytes()
            sources[(result.path, None)] = decode_source(data).text
        except (OSError, SourceError):
            pass
    return sources


def exit_code(run, results) -> int:
    if any(r.internal_error for r in results):
        return EXIT_ERROR
    findings = any(f for r in results for f in r.findings)
    if findings and not run.args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN
