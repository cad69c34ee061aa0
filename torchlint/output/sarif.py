"""SARIF 2.1.0, for GitHub code scanning (`github/codeql-action/upload-sarif`) and other viewers.

One run; `tool.driver.rules[]` describes every rule (id, name, short and full description, help as
text and Markdown, help URI) and every TL9xx diagnostic; each result has `ruleId`, `ruleIndex`,
`level` (the finding's severity: SARIF's "error", "warning" and "note" are torchlint's; diagnostics
are errors), `message.text` and one physical location whose URI is
relative to the project root (the directory of the pyproject.toml holding `[tool.torchlint]`, else
the working directory) under `uriBaseId` `%SRCROOT%`, so paths are stable across checkouts. Regions
are 1-based, `endColumn` one past the end, columns counted in Unicode code points. A notebook
result carries its cell number in `properties.cell` (rows and columns are relative to the cell).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, TextIO
from urllib.parse import quote

from torchlint import __version__
from torchlint.finding import FileResult, Finding

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/torchlint/torchlint"


def _what_it_does(docs: str, section: str = "## What it does") -> str:
    """The "What it does" section of a rule's docs, on one line."""
    text = docs.strip()
    if section in text:
        text = text.split(section, 1)[1]
    return " ".join(text.split("\n## ", 1)[0].split())


def rule_descriptors() -> List[dict]:
    from torchlint import diagnostics
    from torchlint.startup import import_rules

    descriptors = []
    for rule in import_rules().all_rules():
        docs = rule.docs.strip()
        descriptors.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": _what_it_does(docs) or rule.summary},
            "help": {"text": docs, "markdown": docs},
            "helpUri": rule.url(),
            "defaultConfiguration": {"level": rule.default_severity.value},
            "properties": {"fixAvailability": rule.fix_availability},
        })
    for code, name in sorted(diagnostics.ALL.items()):
        text = f"torchlint could not fully check a file ({name.replace('-', ' ')})."
        descriptors.append({
            "id": code,
            "name": name,
            "shortDescription": {"text": text},
            "fullDescription": {"text": text + " The result's message says why; the file's other findings may be missing."},
            "help": {"text": text, "markdown": text},
            "defaultConfiguration": {"level": "error"},
        })
    return descriptors


def artifact_uri(path: str, root: Path) -> Dict[str, str]:
    """The artifactLocation for `path`: relative to `root` under %SRCROOT% when inside it."""
    if path in ("-", "<stdin>"):
        return {"uri": quote(path)}
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(root.resolve()).as_posix()
    except ValueError:
        try:
            relative = absolute.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return {"uri": absolute.as_uri()}
    return {"uri": quote(relative), "uriBaseId": "%SRCROOT%"}


def related_locations(finding: Finding, root: Path) -> List[dict]:
    """The other project files a finding's proof uses ("model.py:4"), as SARIF related locations."""
    return [{
        "id": number,
        "message": {"text": label},
        "physicalLocation": {"artifactLocation": artifact_uri(path, root),
                             "region": {"startLine": row, "startColumn": column}},
    } for number, (path, row, column, label) in enumerate(finding.related, 1)]


def result_object(finding: Finding, index: Dict[str, int], root: Path) -> dict:
    region = {
        "startLine": finding.start.row,
        "startColumn": finding.start.column,
        "endLine": max(finding.end.row, finding.start.row),
        "endColumn": max(finding.end.column, 1),
    }
    result = {
        "ruleId": finding.code,
        "level": "error" if finding.is_diagnostic else finding.severity.value,
        "message": {"text": finding.message},
        "locations": [{
            "physicalLocation": {"artifactLocation": artifact_uri(finding.path, root), "region": region},
        }],
    }
    if finding.related:  # facts from other project files the finding's proof uses
        result["relatedLocations"] = related_locations(finding, root)
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    if finding.cell is not None:
        result["properties"] = {"cell": finding.cell}
    return result


def sarif_log(results: List[FileResult], root: Path) -> dict:
    rules = rule_descriptors()
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "torchlint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root.resolve().as_uri() + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": [result_object(f, index, root) for r in results for f in r.findings],
        }],
    }


def write_sarif(results: List[FileResult], stream: TextIO, options: dict) -> None:
    config = options.get("config")
    root = getattr(config, "root", None) or Path.cwd()
    json.dump(sarif_log(results, Path(root)), stream, indent=2, ensure_ascii=False)
    stream.write("\n")
