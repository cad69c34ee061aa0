"""Report formats through the real CLI: github, sarif (validated against the official SARIF 2.1.0
schema shipped in tests/), json-lines, grouped, and -o/--output-file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.finding import Finding, Location
from torchlint.output.github import annotation, escape_data, escape_property

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).resolve().parent / "sarif-schema-2.1.0.json"
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"
BROKEN = "def f(:\n"


def torchlint(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nselect = [\"TL\"]\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bad.py").write_text(BAD)
    (tmp_path / "src" / "broken.py").write_text(BROKEN)
    (tmp_path / "src" / "ok.py").write_text("x = 1\n")
    return tmp_path


# --- github ----------------------------------------------------------------------------------

def test_github_escaping():
    assert escape_data("100% a\r\nb") == "100%25 a%0D%0Ab"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_annotation_shape_and_multiline_span():
    one = Finding("TL004", "m: a, b\nc", "src/a,b:c.py", Location(4, 30), Location(4, 34))
    assert annotation(one) == ("::warning file=src/a%2Cb%3Ac.py,line=4,col=30,endLine=4,endColumn=34,"
                               "title=torchlint (TL004)::m: a, b%0Ac")
    multi = Finding("TL003", "m", "a.py", Location(2, 5), Location(6, 1))
    assert annotation(multi) == "::warning file=a.py,line=2,endLine=6,title=torchlint (TL003)::m"


def test_github_format_cli(project):
    result = torchlint("--output-format", "github", "src", cwd=project)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    level = json.loads(torchlint("--output-format", "json", "src/bad.py", cwd=project).stdout)[0]["severity"]
    command = {"error": "::error", "warning": "::warning", "note": "::notice"}[level]
    assert f"{command} file=src/bad.py,line=4,col=30,endLine=4,endColumn=34,title=torchlint (TL004)::" in lines[0]
    assert lines[1].startswith("::error file=src/broken.py,line=1,col=7,") and "title=torchlint (TL901)::" in lines[1]
    assert len(lines) == 2  # no summary lines: every line is a workflow command


# --- sarif -----------------------------------------------------------------------------------

def _sarif(project, *paths):
    result = torchlint("--output-format", "sarif", *paths, cwd=project)
    assert result.returncode == 1, result.stderr
    return json.loads(result.stdout)


def test_sarif_validates_against_the_official_schema(project):
    jsonschema = pytest.importorskip("jsonschema")
    if not SCHEMA.exists():
        pytest.skip("tests/sarif-schema-2.1.0.json is not shipped")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    log = _sarif(project, "src")
    cls = jsonschema.validators.validator_for(schema)  # the official file declares draft-04
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    # the schema is really checked: a broken region and level are rejected
    result = log["runs"][0]["results"][0]
    result["level"] = "severe"
    result["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert len(list(validator.iter_errors(log))) >= 2


def test_sarif_content(project):
    from torchlint.rules import all_rules

    log = _sarif(project, "src")
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "torchlint" and driver["version"] and driver["informationUri"].startswith("https://")
    rules = driver["rules"]
    ids = [rule["id"] for rule in rules]
    for rule in all_rules():
        descriptor = rules[ids.index(rule.code)]
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert descriptor["fullDescription"]["text"]
        assert descriptor["help"]["text"] and descriptor["help"]["markdown"] == rule.docs.strip()
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert set(by_rule) == {"TL004", "TL901"}
    for result in run["results"]:
        assert ids[result["ruleIndex"]] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert result["message"]["text"]
    view = by_rule["TL004"]
    severity = json.loads(torchlint("--output-format", "json", "src/bad.py", cwd=project).stdout)[0]["severity"]
    assert view["level"] == severity and by_rule["TL901"]["level"] == "error"
    location = view["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "src/bad.py"  # relative to the config root
    region = location["region"]
    line = BAD.splitlines()[region["startLine"] - 1]
    # 1-based, endColumn one past the end: the region is exactly the `view` name
    assert line[region["startColumn"] - 1:region["endColumn"] - 1] == "view"
    assert by_rule["TL901"]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/broken.py"


def test_sarif_uri_is_relative_to_config_root_from_any_cwd(project):
    (project / "src" / "with space.py").write_text(BAD)
    log = _sarif(project / "src", project / "src" / "with space.py")
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "src/with%20space.py"


def test_sarif_without_findings_is_still_a_valid_log(project):
    result = torchlint("--output-format", "sarif", "src/ok.py", cwd=project)
    assert result.returncode == 0
    log = json.loads(result.stdout)
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"]


# --- json-lines, grouped, output file ----------------------------------------------------------

def test_json_lines_matches_json(project):
    lines = torchlint("--output-format", "json-lines", "src", cwd=project).stdout.splitlines()
    array = json.loads(torchlint("--output-format", "json", "src", cwd=project).stdout)
    assert [json.loads(line) for line in lines] == array
    assert [item["code"] for item in array] == ["TL004", "TL901"]


def test_grouped(project):
    result = torchlint("--output-format", "grouped", "src", cwd=project)
    assert result.returncode == 1
    text = result.stdout
    assert "src/bad.py:\n  4:30 TL004 [*] " in text
    assert "src/broken.py:\n  1:7 TL901 error: cannot parse" in text
    assert "Found 2 findings: 1 error, 1 warning." in text and "ok.py" not in text  # TL901 counted


def test_output_file(project):
    target = project / "report.sarif"
    result = torchlint("--output-format", "sarif", "-o", target, "src", cwd=project)
    assert result.returncode == 1 and result.stdout == ""
    assert json.loads(target.read_text())["runs"][0]["results"]
    concise = torchlint("--output-file", project / "out.txt", "src", cwd=project)
    assert concise.returncode == 1 and "TL004" in (project / "out.txt").read_text()


def test_parse_failures_appear_in_every_format(project):
    for fmt in ("concise", "full", "grouped", "json", "json-lines", "github", "sarif"):
        result = torchlint("--output-format", fmt, "src/broken.py", cwd=project)
        assert "TL901" in result.stdout, fmt
        assert result.returncode == 1, fmt
