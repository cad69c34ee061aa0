"""Severity in every report format, `--min-severity` / `min-severity`, the "## Severity" section
of `torchlint rule`, and the warning of a run that lints no file (`--no-respect-gitignore`).

The writers are tested on made-up findings of each severity, so that these tests do not depend on
which severity a rule decides for a finding (the rules' own tests check that)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.finding import Applicability, Edit, FileResult, Finding, Fix, Location, Severity

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"
DEPRECATED_INIT = "import torch.nn as nn\n\nlayer = nn.Linear(4, 2)\nnn.init.xavier_uniform(layer.weight)\n"


def _finding(path, row, severity, code="TL004", fix=False):
    edit = Edit("x", Location(row, 1), Location(row, 2))
    return Finding(code, f"{severity.value} message", path, Location(row, 1), Location(row, 5), "view-after-transpose",
                   fix=Fix("do it", (edit,), Applicability.SAFE) if fix else None, severity=severity)


def _results():
    return [
        FileResult("a.py", [_finding("a.py", 1, Severity.NOTE), _finding("a.py", 2, Severity.WARNING, fix=True)]),
        FileResult("b.py", [_finding("b.py", 7, Severity.ERROR), _finding("b.py", 9, Severity.NOTE)]),
        FileResult("c.py", []),
    ]


def _write(name, results=None, **options):
    from torchlint.output import writer

    stream = io.StringIO()
    writer(name)(results if results is not None else _results(), stream, options)
    return stream.getvalue()


def test_severity_rank_and_parse():
    assert [s.rank for s in (Severity.ERROR, Severity.WARNING, Severity.NOTE)] == [0, 1, 2]
    assert Severity.parse(" Note ") is Severity.NOTE
    with pytest.raises(ValueError, match="unknown severity"):
        Severity.parse("fatal")


def test_concise_lists_errors_first_with_the_severity_word_and_counts():
    lines = _write("concise").splitlines()
    assert lines[:4] == [
        "b.py:7:1: TL004 error: error message",
        "a.py:2:1: TL004 [*] warning: warning message",
        "a.py:1:1: TL004 note: note message",
        "b.py:9:1: TL004 note: note message",
    ]
    assert "Found 4 findings: 1 error, 1 warning, 2 notes." in lines
    assert "[*] 1 fixable with the --fix option." in lines


def test_summary_leaves_out_absent_severities_and_counts_fixes():
    from torchlint.output.text import summary

    two = [_finding("a.py", 1, Severity.WARNING), _finding("a.py", 2, Severity.WARNING)]
    assert summary(two, {})[0] == "Found 2 findings: 2 warnings."
    assert summary(two[:1], {"fixed": 2})[0] == "Found 3 findings (2 fixed, 1 remaining: 1 warning)."
    assert summary([], {"fixed": 1})[0] == "Found 1 finding (1 fixed, 0 remaining)."
    assert summary([], {}) == ["All checks passed!"]


def test_full_and_grouped_show_the_severity_errors_first():
    full = _write("full")
    assert full.index("b.py:7:1: TL004 error:") < full.index("a.py:2:1: TL004 [*] warning:")
    grouped = _write("grouped")
    # the file with an error comes first, and lists its error first
    assert grouped.startswith("b.py:\n  7:1 TL004 error: error message\n  9:1 TL004 note: note message\n\na.py:\n"
                              "  2:1 TL004 [*] warning: warning message\n  1:1 TL004 note: note message\n")
    assert "Found 4 findings: 1 error, 1 warning, 2 notes." in grouped


def test_json_and_json_lines_carry_the_severity():
    array = json.loads(_write("json"))
    assert [item["severity"] for item in array] == ["note", "warning", "error", "note"]  # path order
    lines = [json.loads(line) for line in _write("json-lines").splitlines()]
    assert lines == array


def test_github_annotation_levels():
    commands = [line.split(" ", 1)[0] for line in _write("github").splitlines()]
    assert commands == ["::notice", "::warning", "::error", "::notice"]


def test_sarif_levels_are_the_severities(tmp_path):
    from torchlint.output.sarif import sarif_log
    from torchlint.rules import all_rules

    log = sarif_log(_results(), tmp_path)
    assert [r["level"] for r in log["runs"][0]["results"]] == ["note", "warning", "error", "note"]
    descriptors = {d["id"]: d for d in log["runs"][0]["tool"]["driver"]["rules"]}
    for rule in all_rules():
        assert descriptors[rule.code]["defaultConfiguration"]["level"] == rule.default_severity.value
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "tests" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.validate(log, schema)


def test_flake8_message_starts_with_the_severity(monkeypatch):
    from torchlint.flake8_plugin import TorchLintChecker

    checker = TorchLintChecker(None, BAD.splitlines(keepends=True), "m.py")
    (row, col, text, _), = list(checker.run())
    assert (row, col) == (4, 29)
    code, word, _ = text.split(" ", 2)
    assert code == "TL004" and word.rstrip(":") in {"error", "warning", "note"} and word.endswith(":")


def test_runtime_report_shows_static_severity(tmp_path):
    from types import SimpleNamespace

    from torchlint.runtime.reconcile import CONFIRMED, FOUND_BY_RUN, Result
    from torchlint.runtime.report import RunReport, WRITERS

    static = SimpleNamespace(finding=_finding("t.py", 3, Severity.ERROR))
    results = [Result("TL004", str(tmp_path / "t.py"), 3, 1, CONFIRMED, "m", static=static),
               Result("TL007", str(tmp_path / "t.py"), 5, None, FOUND_BY_RUN, "n")]
    report = RunReport("t.py", "finished", "finished", 0.1, 0, results, [], 0, [], None, [], None, 1)
    stream = io.StringIO()
    WRITERS["concise"](report, stream, {"format": "concise"})
    assert ":3:1: TL004 CONFIRMED error: m\n" in stream.getvalue()
    assert ":5: TL007 n (found by the run)" in stream.getvalue()
    stream = io.StringIO()
    WRITERS["json"](report, stream, {})
    assert [f["severity"] for f in json.loads(stream.getvalue())["findings"]] == ["error", None]


# --- torchlint rule CODE ---------------------------------------------------------------------

def test_every_rule_documents_its_severity():
    from torchlint.cli import rule_docs
    from torchlint.rules import all_rules

    for rule in all_rules():
        text = rule_docs(rule)
        assert "\n## Severity\n" in text, rule.code
        section = text.split("\n## Severity\n", 1)[1].split("\n## ", 1)[0].strip()
        assert section == rule.severity_text() and section, rule.code
        if "## References" in text:  # the section goes before the references, as the docs' last
            assert text.index("## Severity") < text.index("## References"), rule.code


def test_default_severity_sentence_follows_the_default():
    from torchlint.rules.base import Rule

    class Demo(Rule):
        default_severity = Severity.NOTE

    assert Demo.severity_text().startswith("Findings of this rule are notes")
    Demo.docs = "## What it does\nx\n\n## Severity\nAn error when read back.\n\n## References\n- y\n"
    assert Demo.severity_text() == "An error when read back."
    Demo.severity_docs = "An error where the loss is read back; else a note."
    assert Demo.severity_text() == "An error where the loss is read back; else a note."


# --- the command line ------------------------------------------------------------------------

def torchlint(*args, cwd, env=None):
    environment = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    environment.pop("TORCHLINT_OUTPUT_FORMAT", None)
    return subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, env=environment, timeout=120)


def _main(argv, tmp_path):
    """torchlint in-process (so a test can patch a rule's severity), the report read from a file."""
    from torchlint.cli import main

    out = tmp_path / "report.txt"
    code = main(["--no-cache", "-j", "1", "-o", str(out), *map(str, argv)])
    return code, out.read_text()


def test_min_severity_option_and_config_filter_the_report_and_the_exit_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # A deprecated spelling that still works: a note by the facts of the program.
    (tmp_path / "bad.py").write_text(DEPRECATED_INIT)
    code, text = _main(["bad.py"], tmp_path)
    assert code == 1 and "TL208 [*] note:" in text and "1 note." in text
    code, text = _main(["--min-severity", "note", "bad.py"], tmp_path)
    assert code == 1 and "TL208" in text
    for level in ("warning", "error"):
        code, text = _main(["--min-severity", level, "bad.py"], tmp_path)
        assert code == 0 and "TL208" not in text, level
        assert f"No findings of severity {level} or above.\n1 finding less severe than {level} not shown" in text
    code, text = _main(["--min-severity", "error", "--output-format", "json", "bad.py"], tmp_path)
    assert code == 0 and json.loads(text) == []
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nmin-severity = "warning"\n')
    code, text = _main(["bad.py"], tmp_path)
    assert code == 0 and "TL208" not in text
    code, text = _main(["--min-severity", "note", "bad.py"], tmp_path)  # the option wins
    assert code == 1 and "TL208" in text
    (tmp_path / "broken.py").write_text("def f(:\n")  # a diagnostic is an error: always shown
    code, text = _main(["broken.py"], tmp_path)
    assert code == 1 and "TL901 error:" in text


def test_min_severity_bad_values_are_usage_errors(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    result = torchlint("--min-severity", "fatal", "a.py", cwd=tmp_path)
    assert result.returncode == 2 and "--min-severity" in result.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nmin-severity = "fatal"\n')
    result = torchlint("a.py", cwd=tmp_path)
    assert result.returncode == 2 and "min-severity" in result.stderr


def _git_project(tmp_path):
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("generated/\n")
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "bad.py").write_text(BAD)
    return tmp_path


def test_a_run_that_lints_nothing_says_so(tmp_path):
    project = _git_project(tmp_path)
    result = torchlint(".", cwd=project)
    assert result.returncode == 0
    assert result.stderr == ("warning: No Python files found under the given path(s) (1 file ignored by git; "
                             "--no-respect-gitignore lints it)\n")
    (project / "empty").mkdir()
    result = torchlint("empty", cwd=project)
    assert result.returncode == 0 and result.stderr == "warning: No Python files found under the given path(s)\n"
    assert torchlint("-q", "empty", cwd=project).stderr == ""
    result = torchlint("--output-format", "json", "empty", cwd=project)
    assert result.returncode == 0 and json.loads(result.stdout) == [] and "No Python files" in result.stderr


def test_force_excluded_explicit_files_stay_silent(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["skip.py"]\n')
    (tmp_path / "skip.py").write_text(BAD)
    result = torchlint("--force-exclude", "skip.py", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""


def test_no_respect_gitignore_option_and_config(tmp_path):
    project = _git_project(tmp_path)
    result = torchlint("--no-respect-gitignore", ".", cwd=project)
    assert result.returncode == 1 and "generated/bad.py:4:30: TL004" in result.stdout and result.stderr == ""
    (project / "pyproject.toml").write_text("[tool.torchlint]\nrespect-gitignore = false\n")
    result = torchlint(".", cwd=project)
    assert result.returncode == 1 and "generated/bad.py:4:30: TL004" in result.stdout
    result = torchlint("--respect-gitignore", ".", cwd=project)  # the option wins over the config
    assert result.returncode == 0 and "ignored by git" in result.stderr
    (project / "pyproject.toml").write_text("[tool.torchlint]\nrespect-gitignore = \"no\"\n")
    result = torchlint(".", cwd=project)
    assert result.returncode == 2 and "respect-gitignore" in result.stderr


def test_discovery_reports_what_it_skipped(tmp_path, monkeypatch):
    from torchlint.config import Config
    from torchlint.discovery import collect_files

    project = _git_project(tmp_path)
    monkeypatch.chdir(project)
    skipped = []
    files, missing = collect_files(["."], Config(root=project), skipped=skipped)
    assert files == [] and missing == [] and [(s.path, s.reason) for s in skipped] == [
        ("./generated/bad.py", "ignored by git")]
    files, _ = collect_files(["."], Config(root=project), respect_gitignore=False)
    assert files == ["./generated/bad.py"]
