"""The `torchlint` command. Exit codes: 0 clean, 1 findings, 2 usage/config/internal error.

Only what a run needs is imported: linting never imports torch, the verifier or unused formats.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, TextIO

from torchlint import __version__

from torchlint.report import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, exit_code, report  # noqa: F401


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits itself; we want exit 2 with one clear line
        raise UsageError(message)


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, sized as argparse sizes it but without `shutil`: argparse builds
    a formatter for every `add_argument`, and `shutil` brings `bz2` and `lzma` (3 ms of each run)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width=None) -> None:
        if width is None:
            width = _terminal_columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal's, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def _codes(value: str) -> List[str]:
    return [code.strip().upper() for code in value.split(",") if code.strip()]


def build_parser() -> argparse.ArgumentParser:
    from torchlint.output import FORMATS

    parser = _Parser(
        prog="torchlint",
        formatter_class=_Formatter,
        description="Find PyTorch antipatterns before the code runs. `torchlint rule CODE` explains a rule.",
        epilog="Linting never imports torch and never executes the linted code. `torchlint run SCRIPT [ARGS...]` "
               "is the exception you ask for: it executes the script under instrumentation (needs torch) and "
               "confirms the findings at your lines (`torchlint run --help`).",
    )
    parser.add_argument("paths", nargs="*", help="files or directories to lint (default: .); - reads stdin")
    parser.add_argument("--version", action="version", version=f"torchlint {__version__}")
    parser.add_argument("--select", type=_codes, help="comma-separated codes or prefixes to enable")
    parser.add_argument("--ignore", type=_codes, default=[], help="comma-separated codes or prefixes to disable")
    parser.add_argument("--extend-select", type=_codes, default=[], help="codes to enable on top of the selection")
    parser.add_argument("--output-format", choices=sorted(FORMATS), default=None,
                        help="report format (default: concise)")
    parser.add_argument("-o", "--output-file", help="write the report to this file instead of stdout")
    parser.add_argument("--stdin-filename", help="the name to report for source read from stdin")
    parser.add_argument("--config", help="the pyproject.toml to read [tool.torchlint] from")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (not on errors)")
    parser.add_argument("--statistics", action="store_true", help="count findings per rule")
    parser.add_argument("--list-rules", action="store_true", help="list every rule and exit")
    parser.add_argument("--force-exclude", action="store_true",
                        help="apply `exclude` also to paths passed explicitly (for pre-commit)")
    parser.add_argument("--no-default-excludes", dest="default_excludes", action="store_false",
                        help="lint what the default excludes leave out (.venv, site-packages, build, ...); "
                             "`exclude`/`extend-exclude` from the config still apply")
    parser.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false", default=None,
                        help="also lint files that .gitignore ignores (config: respect-gitignore = false)")
    parser.add_argument("--respect-gitignore", dest="respect_gitignore", action="store_true", default=None,
                        help="leave out what .gitignore ignores even where the config says false (the default)")
    parser.add_argument("-q", "--quiet", action="count", default=0,
                        help="print findings only, no summary and no warnings; -qq prints nothing")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the text report: auto (on a terminal, unless NO_COLOR is set; "
                             "FORCE_COLOR forces it), always or never")
    parser.add_argument("--min-severity", choices=("error", "warning", "note"), default=None,
                        help="show only findings at least this severe (default: note, all); the exit code "
                             "counts only what is shown")
    fixing = parser.add_argument_group("fixing")
    fixing.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    fixing.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that may change behaviour")
    fixing.add_argument("--diff", action="store_true", help="print the fixes as a diff; write nothing")
    fixing.add_argument("--show-fixes", action="store_true", help="list the fixes that were applied")
    fixing.add_argument("--exit-non-zero-on-fix", action="store_true",
                        help="exit 1 when files were fixed, even if nothing remains")
    speed = parser.add_argument_group("speed")
    speed.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: CPU count)")
    speed.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    speed.add_argument("--cache-dir", help="cache directory (default: .torchlint_cache)")
    verify = parser.add_argument_group("runtime verification (needs torch)")
    verify.add_argument("--verify", nargs="*", metavar="CODE",
                        help="run the rules' confirmation cases (optionally only these codes)")
    verify.add_argument("--device", choices=("cpu", "cuda", "all"), help="--verify: where to run")
    verify.add_argument("--claims", action="store_true", help="--verify: also run the refuted-claims cases")
    verify.add_argument("--timeout", type=float, help="--verify: seconds allowed per case")
    return parser


@dataclass
class LintRun:
    """Everything a lint, fix or diff run needs, resolved from the command line and config."""

    args: argparse.Namespace
    config: "object"
    select: List[str]
    ignore: List[str]
    files: List[str] = field(default_factory=list)
    stdin_source: Optional[bytes] = None
    stdin_name: str = "-"
    out: TextIO = sys.stdout
    # (level, count) of the lint findings `--min-severity` left out of the report, once filtered
    below_min_severity: tuple = ()


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except UsageError as error:
        sys.stderr.write(f"torchlint: error: {error}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("torchlint: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception as error:  # the user gets one line, never a traceback
        sys.stderr.write(
            f"torchlint: internal error: {type(error).__name__}: {error}\n"
            "Please report this at https://github.com/torchlint/torchlint/issues\n"
        )
        if os.environ.get("TORCHLINT_DEBUG"):
            raise
        return EXIT_ERROR


def _main(argv: List[str]) -> int:
    from torchlint.startup import compiled_dataclass_methods

    with compiled_dataclass_methods():  # their dataclasses' methods: the kept code, not compiled
        import torchlint.config, torchlint.discovery, torchlint.output  # noqa: F401, E401
    if argv[:1] == ["rule"]:
        return print_rule_docs(argv[1:])
    if argv[:1] == ["shapes"]:
        from torchlint.shapes_command import main as print_shapes

        return print_shapes(argv[1:])
    if argv[:1] == ["run"]:  # executes the user's script: torch is imported only here
        from torchlint.runtime.command import main as run_script

        return run_script(argv[1:])
    args = build_parser().parse_args(argv)
    if args.verify is not None:
        return run_verify(args)
    if args.list_rules:
        return list_rules()

    from torchlint.config import ConfigError, load_config, validate_codes

    paths = args.paths or ["."]
    start = Path(args.stdin_filename or (paths[0] if paths[0] != "-" else "."))
    try:
        config = load_config(start if start.exists() else Path.cwd(), Path(args.config) if args.config else None)
        for option in ("select", "ignore", "extend_select"):
            value = getattr(args, option)
            if value:
                validate_codes(value, f"--{option.replace('_', '-')}")
    except ConfigError as error:
        sys.stderr.write(f"torchlint: config error: {error}\n")
        return EXIT_ERROR
    select = [("TL" if c == "ALL" else c) for c in (args.select if args.select else config.effective_select)]
    select += [("TL" if c == "ALL" else c) for c in args.extend_select]
    if args.select and config.extend_select:
        select += config.extend_select
    ignore = list(config.ignore) + list(args.ignore)
    if args.unsafe_fixes is False and config.unsafe_fixes:
        args.unsafe_fixes = True
    if not args.default_excludes:
        from torchlint.config import DEFAULT_EXCLUDE

        config.exclude = [pattern for pattern in config.exclude if pattern not in DEFAULT_EXCLUDE]
        config.skip_virtualenvs = False
    run = LintRun(args, config, select, ignore)
    if "-" in paths:
        if len(paths) > 1:
            raise UsageError("`-` (stdin) cannot be combined with other paths")
        run.stdin_source = sys.stdin.buffer.read()
        run.stdin_name = args.stdin_filename or "-"
        if args.stdin_filename and args.force_exclude and config.is_excluded(args.stdin_filename):
            return EXIT_CLEAN
    else:
        from torchlint.discovery import collect_files

        skipped: list = []
        run.files, missing = collect_files(paths, config, force_exclude=args.force_exclude,
                                           respect_gitignore=args.respect_gitignore, skipped=skipped)
        for item in missing:
            sys.stderr.write(f"torchlint: {item.path}: {item.reason}\n")
        if missing and not run.files:
            return EXIT_ERROR
        if not args.quiet:  # as ruff, -q prints findings only
            _warn_excluded_by_default(skipped)
            if not run.files:
                _warn_nothing_linted(skipped)
    if args.output_file:
        return _with_output_file(run)
    return execute(run)


def _warn_excluded_by_default(skipped: list) -> None:
    """A directory passed by name that an exclude pattern leaves out says which pattern and how to
    lint it (`torchlint .venv/lib/python3.11/site-packages/foo` lints nothing otherwise)."""
    for item in skipped:
        if not item.reason.startswith("excluded by "):
            continue
        pattern = item.reason[len("excluded by "):]
        from torchlint.config import DEFAULT_EXCLUDE

        if pattern in DEFAULT_EXCLUDE or pattern == "a virtualenv":
            how = "--no-default-excludes lints it"
            what = f"the default exclude {pattern!r}" if pattern in DEFAULT_EXCLUDE else "the default exclude of virtualenvs"
        else:
            how = "remove the pattern from `exclude`/`extend-exclude` to lint it"
            what = f"the exclude pattern {pattern!r}"
        sys.stderr.write(f"warning: {item.path} is skipped: it matches {what}; {how}\n")


def _warn_nothing_linted(skipped: list) -> None:
    """As ruff: a run that lints no file says so on stderr (the exit status stays 0). Silent when
    only explicit files left out by `--force-exclude` were given (pre-commit on excluded files)."""
    if skipped and all(item.reason == "excluded" for item in skipped):
        return
    if any(item.reason.startswith("excluded by ") for item in skipped):
        return  # _warn_excluded_by_default said why
    ignored = sum(1 for item in skipped if item.reason == "ignored by git")
    why = (f" ({ignored} file{'s' if ignored != 1 else ''} ignored by git; --no-respect-gitignore lints "
           f"{'them' if ignored != 1 else 'it'})") if ignored else ""
    sys.stderr.write(f"warning: No Python files found under the given path(s){why}\n")


def _with_output_file(run: LintRun) -> int:
    buffer = io.StringIO()
    run.out = buffer
    code = execute(run)
    try:
        Path(run.args.output_file).write_text(buffer.getvalue(), encoding="utf-8")
    except OSError as error:
        sys.stderr.write(f"torchlint: cannot write {run.args.output_file}: {error}\n")
        return EXIT_ERROR
    return code


def execute(run: LintRun) -> int:
    args = run.args
    if args.fix or args.diff:
        from torchlint.startup import compiled_dataclass_methods

        with compiled_dataclass_methods():  # the fixer imports LibCST: through the kept code
            from torchlint.fixer import run_fix_mode

        return run_fix_mode(run)
    from torchlint.report import shown

    results = shown(run, lint_run(run))
    report(run, results)
    return exit_code(run, results)


def lint_run(run: LintRun):
    """Lint the run's files (or stdin) and return FileResults in a stable order."""
    if run.stdin_source is not None:
        from torchlint.runner import lint_data, rules_for

        rules = rules_for(run.stdin_name, run.config, run.select, run.ignore)
        return [lint_data(run.stdin_name, run.stdin_source, rules)]
    try:
        from torchlint.parallel import lint_paths
    except ImportError:
        from torchlint.runner import lint_files

        return lint_files(run.files, run.config, run.select, run.ignore)
    return lint_paths(run)  # imports the parser only for files that need parsing


def list_rules() -> int:
    """Every rule: a header, then code, `[*]` (a fix is available), the severities its findings can
    have, name and summary; a legend at the end."""
    from torchlint.startup import import_rules

    rules = import_rules().all_rules()
    name_width = max([len(rule.name) for rule in rules] + [4])
    severity_width = max([len(rule.severity_range_text()) for rule in rules] + [8])
    out = [f"{'code':<6} {'fix':<3} {'severity':<{severity_width}} {'name':<{name_width}} summary"]
    for rule in rules:
        fix = "[*]" if rule.fix_availability != "none" else "   "
        out.append(f"{rule.code:<6} {fix} {rule.severity_range_text():<{severity_width}} "
                   f"{rule.name:<{name_width}} {rule.summary}")
    out += ["", f"{len(rules)} rules. [*]: --fix can fix some or all of the rule's findings "
            "(`torchlint rule CODE` says which and how safely).",
            "severity: what a finding of the rule can be (error, warning, note), decided per finding; "
            "TL900-TL905 report files that could not be checked (errors)."]
    sys.stdout.write("\n".join(out) + "\n")
    return EXIT_CLEAN


def rule_docs(rule) -> str:
    availability = {
        "always": "Fix is always available.",
        "sometimes": "Fix is sometimes available.",
        "none": "Fix is not available.",
    }[rule.fix_availability]
    docs = rule.docs.rstrip()
    if "\n## Severity\n" not in "\n" + docs:  # a rule may write the section in its docs itself
        severity = f"## Severity\n{rule.severity_text()}\n\n"
        head, references, tail = docs.rpartition("## References")
        docs = f"{head}{severity}{references}{tail}" if references else f"{docs}\n\n{severity.rstrip()}"
    return f"# {rule.name} ({rule.code})\n\n{availability}\n{docs}\n"


def print_rule_docs(argv: List[str]) -> int:
    from torchlint.startup import import_rules

    rules = import_rules()
    all_rules, get_rule = rules.all_rules, rules.get_rule

    if argv == ["--all"]:
        sys.stdout.write("\n".join(rule_docs(rule) for rule in all_rules()))
        return EXIT_CLEAN
    if len(argv) != 1:
        raise UsageError("usage: torchlint rule CODE (or --all)")
    rule = get_rule(argv[0])
    if rule is None:
        raise UsageError(f"unknown rule {argv[0]!r}; `torchlint --list-rules` lists them")
    sys.stdout.write(rule_docs(rule))
    return EXIT_CLEAN


def run_verify(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        sys.stderr.write("--verify needs torch: pip install 'torchlint[verify]'\n")
        return EXIT_ERROR
    from torchlint import verify

    argv = list(args.verify)
    if args.device:
        argv += ["--device", args.device]
    if args.claims:
        argv.append("--claims")
    if args.timeout:
        argv += ["--timeout", str(args.timeout)]
    if args.output_format == "json":
        argv += ["--output-format", "json"]
    return verify.main(argv)
