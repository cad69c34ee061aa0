"""The command line through a real subprocess: exit codes, formats, stdin, config errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"
CLEAN = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).reshape(-1)\n"


def torchlint(*args: str, cwd: Path = ROOT, stdin: str = None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "torchlint", *args],
        cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=120,
    )


def test_fixtures_have_findings_exit_1():
    result = torchlint("fixtures/")
    assert result.returncode == 1, result.stderr
    assert "TL004" in result.stdout
    assert "Found " in result.stdout


def test_clean_file_exit_0(tmp_path):
    (tmp_path / "ok.py").write_text(CLEAN)
    result = torchlint(str(tmp_path / "ok.py"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed!" in result.stdout


def test_concise_line_format(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    result = torchlint(str(tmp_path / "bad.py"))
    assert result.returncode == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'bad.py'}:4:30: TL004 [*] ")


def test_exit_zero(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    assert torchlint("--exit-zero", str(tmp_path / "bad.py")).returncode == 0


def test_json_schema(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    result = torchlint("--output-format", "json", str(tmp_path / "bad.py"))
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert isinstance(data, list) and len(data) == 1
    item = data[0]
    assert set(item) >= {"code", "message", "filename", "location", "end_location", "fix", "url"}
    assert item["code"] == "TL004"
    assert item["location"] == {"row": 4, "column": 30}
    assert item["end_location"] == {"row": 4, "column": 34}
    assert item["fix"]["applicability"] == "safe"
    assert item["fix"]["edits"][0]["content"] == "contiguous().view"


def test_json_on_fixtures_is_valid():
    result = torchlint("--output-format", "json", "fixtures/")
    data = json.loads(result.stdout)
    assert data and all(isinstance(d["location"]["row"], int) for d in data)


def test_stdin_with_filename():
    result = torchlint("-", "--stdin-filename", "model/attn.py", stdin=BAD)
    assert result.returncode == 1
    assert result.stdout.startswith("model/attn.py:4:30: TL004")


def test_select_and_ignore(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    assert torchlint("--ignore", "TL004", str(tmp_path / "bad.py")).returncode == 0
    assert torchlint("--select", "TL0", str(tmp_path / "bad.py")).returncode == 1


def test_unknown_code_is_usage_error(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    result = torchlint("--select", "TL999", str(tmp_path / "bad.py"))
    assert result.returncode == 2
    assert "TL999" in result.stderr


@pytest.mark.parametrize("code", ["TL900", "TL901", "TL903", "TL905", "TL906"])
def test_every_diagnostic_code_is_a_known_code(tmp_path, code):
    (tmp_path / "bad.py").write_text(BAD)
    result = torchlint("--ignore", code, str(tmp_path / "bad.py"))
    assert result.returncode == 1, result.stderr


def test_config_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL004"]\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(BAD)
    assert torchlint(str(tmp_path / "pkg")).returncode == 0


def test_per_file_ignores(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint.per-file-ignores]\n"tests/*" = ["TL004"]\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bad.py").write_text(BAD)
    (tmp_path / "bad.py").write_text(BAD)
    result = torchlint(".", cwd=tmp_path)
    assert result.returncode == 1
    assert "tests/bad.py" not in result.stdout and "bad.py" in result.stdout


@pytest.mark.parametrize("content, needle", [
    ('[tool.torchlint]\nselekt = ["TL004"]\n', "unknown key"),
    ('[tool.torchlint]\nignore = ["TL999"]\n', "TL999"),
    ('[tool.torchlint]\nignore = "TL004"\n', "must be a list"),
    ('[tool.torchlint\n', "cannot read config"),
])
def test_config_errors_exit_2(tmp_path, content, needle):
    (tmp_path / "pyproject.toml").write_text(content)
    (tmp_path / "bad.py").write_text(BAD)
    result = torchlint(".", cwd=tmp_path)
    assert result.returncode == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_exclude_and_default_skips(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["generated"]\n')
    for folder in ("generated", "build", "__pycache__", "src"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "bad.py").write_text(BAD)
    (tmp_path / "venvdir").mkdir()
    (tmp_path / "venvdir" / "pyvenv.cfg").write_text("")
    (tmp_path / "venvdir" / "bad.py").write_text(BAD)
    result = torchlint(".", cwd=tmp_path)
    lines = [l for l in result.stdout.splitlines() if "TL004" in l]
    assert len(lines) == 1 and lines[0].startswith("./src/bad.py") or lines[0].startswith("src/bad.py"), lines


def test_gitignored_files_skipped(tmp_path):
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git not available")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "bad.py").write_text(BAD)
    (tmp_path / "kept.py").write_text(BAD)
    result = torchlint(".", cwd=tmp_path)
    assert "kept.py" in result.stdout and "ignored" not in result.stdout


def test_missing_path_exit_2(tmp_path):
    result = torchlint(str(tmp_path / "nope.py"))
    assert result.returncode == 2
    assert "no such file" in result.stderr


def test_version_and_list_rules():
    assert torchlint("--version").stdout.startswith("torchlint ")
    listed = torchlint("--list-rules")
    assert listed.returncode == 0 and "TL004" in listed.stdout


def test_rule_docs_sections():
    result = torchlint("rule", "TL004")
    assert result.returncode == 0
    out = result.stdout
    assert out.startswith("# view-after-transpose (TL004)")
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:", "## Fix safety",
                    "## Severity", "## References"):
        assert section in out
    assert out.index("## Fix safety") < out.index("## Severity") < out.index("## References")


def test_rule_unknown_code():
    result = torchlint("rule", "TL999")
    assert result.returncode == 2 and "unknown rule" in result.stderr


def test_bad_flag_is_usage_error():
    result = torchlint("--no-such-flag")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_syntax_error_is_diagnostic_and_run_continues(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n    x.view(1)\n")
    (tmp_path / "bad.py").write_text(BAD)
    result = torchlint(str(tmp_path))
    assert "TL901" in result.stdout and "TL004" in result.stdout
    assert "Traceback" not in result.stderr + result.stdout
