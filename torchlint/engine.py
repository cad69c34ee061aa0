"""Linting one source text: one parse, one traversal, every enabled rule, findings with positions.

Nothing here imports torch or executes the code being linted.
"""

from __future__ import annotations

import os

from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint import diagnostics, legacy_syntax, parsing
from torchlint.analysis import project
from torchlint.analysis.semantic import Semantic
from torchlint.finding import Edit, FileResult, Finding, Fix, Location
from torchlint.positions import node_ranges
from torchlint.prefilter import cpython_syntax_error, syntax_ok, too_deep
from torchlint.rules.base import InsertBefore, Rebracket, RemoveLines, Replace, Report, Rule, RuleContext
from torchlint.source import SourceError, decode_source
from torchlint.startup import import_rules
from torchlint.suppression import Suppressions
from torchlint.positions import code_for_node

# Developers set TORCHLINT_RAISE=1 to see a rule's traceback instead of a TL903 finding.
_RAISE_INTERNAL_ERRORS = bool(os.environ.get("TORCHLINT_RAISE"))


def select_rules(select: Optional[Iterable[str]] = None, ignore: Iterable[str] = ()) -> List[Rule]:
    """Rules whose code starts with a selected prefix and with no ignored prefix (flake8 style)."""
    selected = tuple(select) if select is not None else ("TL",)
    ignored = tuple(ignore)
    return [
        rule
        for rule in import_rules().all_rules()  # the rule modules load through the kept dataclass code
        if rule.code.startswith(selected) and not (ignored and rule.code.startswith(ignored))
    ]


def could_match(text: str, rules: Sequence[Rule]) -> bool:
    """Whether any rule could fire on `text`, judged from its triggers without parsing."""
    return not PREFILTER_ENABLED or bool(rules_that_could_fire(text, rules))


def rules_that_could_fire(text: str, rules: Sequence[Rule], imported: str = "") -> Sequence[Rule]:
    """The rules with a trigger in `text`, or (for a rule whose facts may come from another file)
    in `imported`, the text of the project files this one imports; all of them when the
    pre-filter is off. A rule none of whose triggers occurs cannot report, so its matcher is not
    run on this file either."""
    if not PREFILTER_ENABLED:
        return rules
    found = text.__contains__
    answers: Dict[Tuple[Tuple[str, ...], bool], bool] = {}  # the shape rules share one trigger list
    could = []
    for rule in rules:
        triggers = rule.triggers
        if not triggers:
            could.append(rule)
            continue
        key = (tuple(triggers), rule.cross_file_triggers)
        answer = answers.get(key)
        if answer is None:
            answer = answers[key] = any(map(found, triggers)) or bool(
                imported and rule.cross_file_triggers and any(map(imported.__contains__, triggers)))
        if answer:
            could.append(rule)
    return could


# Tests switch this off to prove the pre-filter sound (identical findings with and without it).
PREFILTER_ENABLED = True


def lint_source(
    source: str,
    path: str = "<string>",
    select: Optional[Iterable[str]] = None,
    ignore: Iterable[str] = (),
) -> List[Finding]:
    """Lint Python source text with the selected rules; the simplest entry point (used by the
    verifier and tests). Diagnostics (syntax errors) are included as TL9xx findings."""
    return lint_text(source, path, select_rules(select, ignore)).findings


def lint_bytes(data: bytes, path: str, rules: Sequence[Rule], respect_noqa: bool = True) -> FileResult:
    try:
        source = decode_source(data)
    except SourceError as error:
        return diagnostics.failure(path, diagnostics.DECODE_ERROR, str(error), error.row, error.column)
    return lint_text(source.text, path, rules, respect_noqa=respect_noqa)


def lint_text(
    text: str,
    path: str,
    rules: Sequence[Rule],
    respect_noqa: bool = True,
    module: Optional[cst.Module] = None,
) -> FileResult:
    result = FileResult(path)
    given = module is not None  # parsed by the caller, maybe from another text
    suppressions = Suppressions(text) if respect_noqa else None
    if suppressions is not None and suppressions.file_ignored:
        return result
    if module is None:
        # A rule's trigger may stand in a project file this one imports (`Dropout` in model.py).
        imported, result.dependencies = project.imported_text(path, text)
        rules = rules_that_could_fire(text, rules, imported)
        if not rules:
            if syntax_ok(text):  # no rule can fire; still report a syntax error like any other file
                return result
            parsed = parse(text, path)
            return parsed if isinstance(parsed, FileResult) else result
    recovery = None
    shared = project.shared_semantic(path, text) if module is None else None
    if shared is not None:
        module = shared.module  # parsed already in this process, as a module another file imports
    if module is None:
        parsed = parse(text, path)
        if isinstance(parsed, FileResult):
            # PyTorch 0.3's `x.cuda(async=True)`: lint it as `non_blocking=True` (TL204).
            recovery = legacy_syntax.recover(text) if legacy_syntax.enabled(rules) else None
            recovered = parse(recovery.text, path) if recovery is not None else parsed
            if isinstance(recovered, FileResult):
                return parsed  # any other syntax error stays TL901
            parsed = recovered
        module = parsed
    kept = shared is not None  # the project layer keeps this model for the files that import it
    try:
        semantic = shared
        if semantic is None:
            semantic = Semantic(module, path=path, project=project.for_file(path, module),
                                text=None if given else text if recovery is None else recovery.text)
            if recovery is None:
                kept = project.remember(path, text, semantic)
    except RecursionError:
        return diagnostics.failure(path, diagnostics.TOO_COMPLEX, "nesting too deep to analyse")
    linted = text if recovery is None else recovery.text
    reports = run_rules(semantic, path, rules, result, recovery)
    if semantic.project is not None and semantic.project.read:
        result.dependencies.update(semantic.project.read)
    findings = to_findings(module, linted, path, reports, suppressions, semantic.index)
    if recovery is not None:
        findings = [recovery.finding_in_file(finding) for finding in findings]
    result.findings.extend(findings)
    result.findings.sort(key=lambda f: f.sort_key)
    if not kept:
        semantic.release()
    return result


def parse(text: str, path: str):
    """The module, or a FileResult carrying the parse diagnostic."""
    deep = too_deep(text)  # LibCST's native parser crashes the process on very deep nesting
    if deep is not None:
        return diagnostics.failure(path, diagnostics.TOO_COMPLEX, deep)
    try:
        return parsing.parse_module(text)
    except cst.ParserSyntaxError as error:
        precise = cpython_syntax_error(text)  # LibCST's native parser points past the error
        if precise is not None:
            reason, row, column = precise
            return diagnostics.failure(path, diagnostics.SYNTAX_ERROR, f"cannot parse: {reason}", row, column)
        reason = str(error.message).strip().splitlines()[0] if error.message else "invalid syntax"
        return diagnostics.failure(
            path, diagnostics.SYNTAX_ERROR, f"cannot parse: {reason}", error.raw_line, error.raw_column + 1
        )
    except RecursionError:
        return diagnostics.failure(path, diagnostics.TOO_COMPLEX, "nesting too deep to parse")
    except Exception as error:  # LibCST's native parser can raise other errors on odd input
        return diagnostics.failure(path, diagnostics.SYNTAX_ERROR, f"cannot parse: {error}")


def run_rules(semantic: Semantic, path: str, rules: Sequence[Rule], result: FileResult,
              recovery: Optional[legacy_syntax.Recovery] = None) -> List[Report]:
    by_type: Dict[type, List[Rule]] = defaultdict(list)
    for rule in rules:
        for node_type in rule.node_types:
            by_type[node_type].append(rule)
    ctx = RuleContext(semantic, path)
    if recovery is not None:
        ctx.rewritten_async_arguments = legacy_syntax.rewritten_arguments(
            semantic.module, semantic.index.nodes(cst.Arg), recovery)
    broken: set = set()
    for node_type, interested in by_type.items():
        nodes = semantic.index.nodes(node_type)
        if not nodes:
            continue
        for rule in interested:
            if rule.code in broken:
                continue
            ctx._rule = rule
            try:
                chosen = rule.candidates(node_type, semantic)
                check = rule.check
                for node in nodes if chosen is None else chosen:
                    check(node, ctx)
            except Exception as error:  # one broken rule must not stop the others
                if _RAISE_INTERNAL_ERRORS:
                    raise
                broken.add(rule.code)
                ctx.reports = [r for r in ctx.reports if r.rule is not rule]
                result.internal_error = True
                result.findings.append(diagnostics.internal_error(path, rule.code, error))
    if not ctx.reports:
        return ctx.reports
    from torchlint.analysis.configuration import lower_off_branches

    # A finding on a branch the default configuration never takes is one step less severe.
    return lower_off_branches(semantic, ctx.reports)


def to_findings(
    module: cst.Module,
    text: str,
    path: str,
    reports: Sequence[Report],
    suppressions: Optional[Suppressions],
    index=None,
) -> List[Finding]:
    if not reports:
        return []
    targets = []
    for report in reports:
        targets.append(report.node)
        if report.fix is not None:
            for edit in report.fix.edits:
                targets.extend(_edited_nodes(edit))
    ranges = node_ranges(module, targets, index, text)
    lines = text.splitlines(keepends=True)
    findings: List[Finding] = []
    seen = set()
    for report in reports:
        span = ranges.get(report.node)
        if span is None:
            continue
        (row, col), (end_row, end_col) = span
        code = report.rule.code
        if suppressions is not None and suppressions.is_suppressed(code, row):
            continue
        key = (code, row, col)
        if key in seen:
            continue
        seen.add(key)
        fix = None
        if report.fix is not None:
            edits = _edits(module, lines, ranges, report.fix.edits)
            if edits is not None:
                fix = Fix(report.fix.message, tuple(edits), report.fix.applicability)
        findings.append(
            Finding(
                code=code,
                message=report.message,
                path=path,
                start=Location(row, col + 1),
                end=Location(end_row, end_col + 1),
                rule_name=report.rule.name,
                fix=fix,
                severity=report.severity or report.rule.default_severity,
                related=report.related,
            )
        )
    return findings


def _edited_nodes(spec) -> Tuple[cst.CSTNode, ...]:
    if isinstance(spec, Rebracket):
        return (spec.opening_node, spec.closing_node)
    return (spec.node,)


def _edits(module, lines, ranges, specs) -> Optional[List[Edit]]:
    edits = []
    for spec in specs:
        if isinstance(spec, Rebracket):
            opening, closing = ranges.get(spec.opening_node), ranges.get(spec.closing_node)
            if opening is None or closing is None:
                return None
            (row, col), _ = opening
            _, (end_row, end_col) = closing
            edits.append(Edit(spec.opening, Location(row, col + 1), Location(row, col + 2)))
            edits.append(Edit(spec.closing, Location(end_row, end_col), Location(end_row, end_col + 1)))
            continue
        span = ranges.get(spec.node)
        if span is None:
            return None
        (row, col), (end_row, end_col) = span
        if isinstance(spec, Replace):
            content = spec.content if isinstance(spec.content, str) else code_for_node(module, spec.content)
            edits.append(Edit(content, Location(row, col + 1), Location(end_row, end_col + 1)))
        elif isinstance(spec, InsertBefore):
            line = lines[row - 1] if row - 1 < len(lines) else ""
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            newline = module.default_newline
            edits.append(Edit(spec.text + newline + indent, Location(row, col + 1), Location(row, col + 1)))
        elif isinstance(spec, RemoveLines):
            edits.append(Edit("", Location(row, 1), Location(end_row + 1, 1)))
    return edits
