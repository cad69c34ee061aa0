"""Bad input never crashes a run (issue 9): each gets one clear diagnostic and the run goes on.

Every case is linted through the real command together with a file that has a real finding, so
each test also proves that the other files still report.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchlint import engine
from torchlint.engine import lint_source

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"


def torchlint(*args, cwd=ROOT, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)


def lint_json(tmp_path, *paths, extra=()):
    good = tmp_path / "zz_good.py"
    good.write_text(BAD)
    result = torchlint("--output-format", "json", *extra, *paths, good)
    data = json.loads(result.stdout) if result.stdout.strip() else []
    assert any(item["code"] == "TL004" and item["filename"].endswith("zz_good.py") for item in data), \
        (result.stdout, result.stderr)
    return result, [item for item in data if not item["filename"].endswith("zz_good.py")]


def codes(items):
    return [item["code"] for item in items]


# --- source text ---------------------------------------------------------------------------

@pytest.mark.parametrize("source, row", [
    ("def f(:\n    pass\n", 1),
    ("import torch\nx = torch.ones(2)\nprint 'hello'\n", 3),  # Python 2
    ("exec 'x = 1'\nraise ValueError, 'no'\n", 1),  # Python 2
    ("x = (1,\n", None),  # unexpected end of file
])
def test_syntax_errors(tmp_path, source, row):
    path = tmp_path / "broken.py"
    path.write_text(source)
    result, items = lint_json(tmp_path, path)
    assert codes(items) == ["TL901"]
    assert "cannot parse" in items[0]["message"]
    if row is not None:
        assert items[0]["location"]["row"] == row
    assert result.returncode == 1  # a finding-like diagnostic, not an internal error


@pytest.mark.parametrize("content", [b"", b"\n\n", b"# only a comment\n# and another\n", b"   \n\t\n"])
def test_empty_and_comment_only_files(tmp_path, content):
    path = tmp_path / "empty.py"
    path.write_bytes(content)
    _, items = lint_json(tmp_path, path)
    assert items == []


@pytest.mark.parametrize("data, reason", [
    (b"# -*- coding: ascii -*-\nx = '\xc3\xa9'\n", "not valid ascii"),
    (b"x = '\xff\xfe'\n", "not valid utf-8"),
    (b"# coding: no-such-codec\nx = 1\n", "unknown encoding"),
    (b"x = 1\n\x00y = 2\n", "NUL byte (line 2, column 1)"),
    (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "BOM"),
])
def test_decode_errors(tmp_path, data, reason):
    path = tmp_path / "bytes.py"
    path.write_bytes(data)
    _, items = lint_json(tmp_path, path)
    assert codes(items) == ["TL902"]
    assert reason in items[0]["message"]


@pytest.mark.parametrize("data, row, column, reason", [
    # latin-1 bytes without a cookie: at the offending byte, not at 1:1
    (b"x = 1\ny = 'caf\xe9'\n", 2, 9, "byte 0xe9 at line 2, column 9"),
    # a multi-byte character before it on the line counts as one column
    (b"s = '\xc3\xa9\xff'\n", 1, 7, "byte 0xff at line 1, column 7"),
    # a binary file: the NUL byte is the reason, though bytes before it do not decode either
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 3, 1, "NUL byte (line 3, column 1): a binary file"),
    (b"# coding: ascii\nx = '\xff'\0\n", 2, 8, "NUL byte"),
])
def test_decode_error_position_and_reason(tmp_path, data, row, column, reason):
    path = tmp_path / "bytes.py"
    path.write_bytes(data)
    _, items = lint_json(tmp_path, path)
    assert codes(items) == ["TL902"]
    assert reason in items[0]["message"]
    assert (items[0]["location"]["row"], items[0]["location"]["column"]) == (row, column)


def test_latin1_cookie_is_honoured(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# coding: latin-1\n# caf\xe9\n" + BAD.encode())
    _, items = lint_json(tmp_path, path)
    assert codes(items) == ["TL004"]


def test_bom_file_is_linted_with_unshifted_columns(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + BAD.encode())
    _, items = lint_json(tmp_path, path)
    assert codes(items) == ["TL004"]
    assert items[0]["location"] == {"row": 4, "column": 30}


def test_huge_file(tmp_path):
    lines = []
    for i in range(100_000):
        lines.append(f"x{i} = {i}\n" if i % 10 == 0 else f"# line {i}\n")
    path = tmp_path / "huge.py"
    path.write_text("".join(lines) + BAD)
    assert path.read_text().count("\n") > 100_000
    start = time.monotonic()
    _, items = lint_json(tmp_path, path)
    assert codes(items) == ["TL004"] and items[0]["location"]["row"] == 100_004
    assert time.monotonic() - start < 240


@pytest.mark.parametrize("source, expected", [
    ("x = " + "(" * 5000 + "y.view(1)" + ")" * 5000 + "\n", "TL904"),  # LibCST would segfault
    ("x = " + "[" * 50_000 + "]" * 50_000 + "  # view\n", "TL904"),
    ("".join("    " * i + "if x:\n" for i in range(1000)) + "    " * 1000 + "y.view(1)\n", "TL901"),
    ("x = " + "(" * 150 + "y.view(1)" + ")" * 150 + "\n", None),  # deep but legal
    ("def f(x):\n" + "".join("    " * (i + 1) + "if x:\n" for i in range(90)) + "    " * 91 + "x.view(1)\n", None),
])
def test_pathological_nesting_is_reported_quickly(tmp_path, source, expected):
    path = tmp_path / "deep.py"
    path.write_text(source)
    start = time.monotonic()
    _, items = lint_json(tmp_path, path)
    assert codes(items) == ([expected] if expected else [])
    assert time.monotonic() - start < 60


def test_deep_nesting_in_process_does_not_crash():
    findings = lint_source("x = " + "(" * 3000 + "a.view(1)" + ")" * 3000 + "\n")
    assert [f.code for f in findings] == ["TL904"]
    # brackets inside strings do not count against the limit
    findings = lint_source("s = '" + "(" * 3000 + "'\ny = x.transpose(0, 1).view(-1)\n")
    assert [f.code for f in findings] == ["TL004"]


# --- notebooks -----------------------------------------------------------------------------

def notebook(*cells):
    return json.dumps({"cells": [{"cell_type": kind, "source": source, "metadata": {}} for kind, source in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_notebook_not_json(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text("{ not json")
    _, items = lint_json(tmp_path, path)
    assert codes(items) == ["TL905"]


def test_notebook_without_code_cells(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(("markdown", "# Title\nx.transpose(0, 1).view(-1)"), ("raw", "view")))
    _, items = lint_json(tmp_path, path)
    assert items == []


def test_notebook_cell_that_does_not_parse(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(("code", "def f(:\n"), ("markdown", "x"), ("code", BAD)))
    _, items = lint_json(tmp_path, path)
    assert sorted(codes(items)) == ["TL004", "TL901"]


# --- paths ---------------------------------------------------------------------------------

def test_directory_named_like_a_python_file(tmp_path):
    weird = tmp_path / "pkg" / "x.py"
    weird.mkdir(parents=True)
    (weird / "inner.py").write_text(BAD)
    result, items = lint_json(tmp_path, tmp_path / "pkg")
    assert codes(items) == ["TL004"] and items[0]["filename"].endswith("inner.py")
    result, items = lint_json(tmp_path, weird)  # explicitly: it is a directory, recursed
    assert codes(items) == ["TL004"]


def test_missing_path_and_dangling_symlink(tmp_path):
    link = tmp_path / "dangling.py"
    link.symlink_to(tmp_path / "nowhere.py")
    result, items = lint_json(tmp_path, tmp_path / "missing.py", link)
    assert items == []
    assert "missing.py: no such file or directory" in result.stderr
    assert "dangling.py: dangling symbolic link" in result.stderr
    only = torchlint(tmp_path / "missing.py")
    assert only.returncode == 2 and "no such file" in only.stderr


def test_fifo_is_not_read(tmp_path):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)  # opening it would block forever
    result, items = lint_json(tmp_path, fifo)
    assert items == [] and "pipe.py: not a regular file" in result.stderr


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read mode-000 files")
def test_unreadable_file(tmp_path):
    path = tmp_path / "secret.py"
    path.write_text(BAD)
    path.chmod(0)
    try:
        _, items = lint_json(tmp_path, path)
    finally:
        path.chmod(0o644)
    assert codes(items) == ["TL900"]


def test_unreadable_file_reported_in_process(tmp_path, monkeypatch):
    """Works as root too: the read itself fails (a file that vanishes after discovery)."""
    from torchlint import parallel
    from torchlint.config import Config

    path = tmp_path / "gone.py"
    linter = parallel.Linter(Config(), ["TL"], [], None)
    result = linter.lint(str(path))
    assert [f.code for f in result.findings] == ["TL900"] and "cannot read file" in result.findings[0].message


# --- internal errors -----------------------------------------------------------------------

def _run_with_broken_rule(tmp_path, monkeypatch, jobs, count):
    from torchlint.cli import main
    from torchlint.rules import get_rule

    rule = get_rule("TL004")

    def boom(node, ctx):
        if "boom" in ctx.path:
            raise ZeroDivisionError("rule bug")
        return type(rule).check(rule, node, ctx)

    monkeypatch.setattr(rule, "check", boom)
    files = []
    for i in range(count):
        path = tmp_path / (f"boom{i}.py" if i == 0 else f"ok{i}.py")
        path.write_text(BAD)
        files.append(str(path))
    out = tmp_path / "report.json"
    code = main(["--no-cache", "--jobs", str(jobs), "--output-format", "json", "-o", str(out), *files])
    return code, json.loads(out.read_text())


@pytest.mark.parametrize("jobs, count", [(1, 3), (2, 10)])
def test_internal_error_in_one_rule(tmp_path, monkeypatch, jobs, count):
    code, items = _run_with_broken_rule(tmp_path, monkeypatch, jobs, count)
    assert code == 2
    broken = [i for i in items if i["filename"].endswith("boom0.py")]
    assert [i["code"] for i in broken] == ["TL903"]
    assert "internal error in TL004" in broken[0]["message"] and "ZeroDivisionError" in broken[0]["message"]
    others = [i for i in items if not i["filename"].endswith("boom0.py")]
    assert [i["code"] for i in others] == ["TL004"] * (count - 1)


def test_internal_error_keeps_other_rules(monkeypatch):
    from torchlint.rules import get_rule

    rule = get_rule("TL004")
    monkeypatch.setattr(rule, "check", lambda node, ctx: 1 / 0)
    source = BAD + "\nfor x in loader:\n    optimizer.step()\n"
    result = engine.lint_text(source, "t.py", engine.select_rules())
    assert result.internal_error
    assert [f.code for f in result.findings].count("TL903") == 1
    expected_others = {f.code for f in lint_source(source) if f.code != "TL004"}
    assert expected_others <= {f.code for f in result.findings}


# --- every output format shows parse failures alike ----------------------------------------

def test_parse_failures_in_every_format(tmp_path):
    from torchlint.output import FORMATS

    path = tmp_path / "broken.py"
    path.write_text("x = 1\ndef f(:\n")
    for name in sorted(FORMATS):
        result = torchlint("--output-format", name, path)
        assert result.returncode == 1, (name, result.stderr)
        text = result.stdout
        assert "TL901" in text, (name, text)
        if name == "json":
            item = json.loads(text)[0]
            assert item["location"]["row"] == 2 and "cannot parse" in item["message"]
        elif name == "sarif":
            result_ = json.loads(text)["runs"][0]["results"][0]
            assert result_["ruleId"] == "TL901"
            assert result_["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
        else:
            assert any(marker in text for marker in (":2:", "2:7", "line=2", '"startLine": 2', '"row": 2')), (name, text)


# --- generated programs --------------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
hypothesmith = pytest.importorskip("hypothesmith")


@hypothesis.settings(max_examples=40, deadline=None, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(hypothesmith.from_grammar())
def test_generated_programs_never_raise(source):
    findings = lint_source(source)
    assert not [f for f in findings if f.code == "TL903"], findings


@hypothesis.settings(max_examples=20, deadline=None, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(hypothesmith.from_node())
def test_generated_syntax_trees_never_raise(source):
    findings = lint_source(source)
    assert not [f for f in findings if f.code == "TL903"], findings


# --- security ------------------------------------------------------------------------------

def test_linting_never_runs_user_code(tmp_path):
    marker = tmp_path / "EXECUTED"
    payload = (
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "import os\n"
        f"os.system('touch {marker}')\n"
        f"__import__('pathlib').Path({str(marker)!r}).touch()\n"
        "import torch\n"
        "x = torch.ones(2, 3).transpose(0, 1).view(-1)\n"
        "if __name__ == '__main__':\n"
        f"    open({str(marker)!r}, 'w')\n"
    )
    (tmp_path / "evil.py").write_text(payload)
    (tmp_path / "conftest.py").write_text(payload)
    (tmp_path / "setup.py").write_text(payload)
    result = torchlint("--output-format", "json", tmp_path)
    assert result.returncode == 1, result.stderr
    assert {item["code"] for item in json.loads(result.stdout)} == {"TL004"}
    result = torchlint("-", "--stdin-filename", "evil.py", cwd=tmp_path)
    assert not marker.exists()


def test_config_is_data(tmp_path):
    marker = tmp_path / "IMPORTED"
    (tmp_path / "evilplugin.py").write_text(f"open({str(marker)!r}, 'w')\n")
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nplugins = ["evilplugin"]\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    result = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "bad.py"], cwd=tmp_path,
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2 and "unknown key" in result.stderr
    for value in ('select = ["evilplugin"]', 'cache-dir = "evilplugin"', 'ignore = ["__import__(\'evilplugin\')"]'):
        (tmp_path / "pyproject.toml").write_text(f"[tool.torchlint]\n{value}\n")
        subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "bad.py"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120)
    assert not marker.exists()
