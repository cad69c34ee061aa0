"""The flake8 plugin through real flake8 in a subprocess: same findings as the CLI, stdin mode,
syntax errors, noqa handled by flake8 itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.flake8_plugin import TorchLintChecker

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"
FLAKE8_LINE = re.compile(r"^(?P<path>.+?):(?P<row>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+) (?P<message>.*)$")


def _plugin_registered() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == "TL" for ep in entry_points(group="flake8.extension"))


pytestmark = pytest.mark.skipif(
    not _plugin_registered(), reason="torchlint is not installed in this environment (pip install -e .)"
)


def flake8(*args, cwd=ROOT, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", *map(str, args)], cwd=cwd, input=stdin,
                          capture_output=True, text=True, env=env, timeout=300)


def parse(stdout: str):
    found = set()
    for line in stdout.splitlines():
        match = FLAKE8_LINE.match(line)
        assert match, line
        found.add((os.path.normpath(match["path"]), int(match["row"]), int(match["col"]), match["code"]))
    return found


def test_plugin_class_shape():
    assert TorchLintChecker.name == "torchlint" and TorchLintChecker.version
    import inspect

    assert list(inspect.signature(TorchLintChecker.__init__).parameters)[:3] == ["self", "tree", "lines"]


def _ast_parses(path: Path) -> bool:
    import ast

    try:
        ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return False
    return True


def test_same_findings_as_the_cli_over_the_fixtures():
    # flake8 runs no plugin on a file ast cannot parse (TL204's `.cuda(async=True)`): E999 only
    files = sorted(str(p.relative_to(ROOT)) for p in FIXTURES.glob("TL*/*.py") if _ast_parses(p))
    assert files
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cli = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "--output-format", "json", *files],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    expected = {(os.path.normpath(i["filename"]), i["location"]["row"], i["location"]["column"], i["code"])
                for i in json.loads(cli.stdout) if not i["code"].startswith("TL9")}
    # the fixtures' `# noqa` comments are applied by the CLI and by flake8 alike
    result = flake8("--select", "TL", *files)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert parse(result.stdout) == expected
    assert len(expected) > 20


def test_column_points_at_the_same_character_as_the_cli(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(BAD)
    found = parse(flake8("--select", "TL", path).stdout)
    assert found == {(str(path), 4, 30, "TL004")}
    assert BAD.splitlines()[3][30 - 1:].startswith("view")


def test_message_names_the_severity_after_the_code(tmp_path):
    # flake8 has no severity: the code stays the code, the message starts with the severity word
    path = tmp_path / "m.py"
    path.write_text(BAD)
    (line,) = flake8("--select", "TL", path).stdout.splitlines()
    message = FLAKE8_LINE.match(line).group("message")
    assert message.split(":", 1)[0] in {"error", "warning", "note"}, line


def test_stdin_mode_uses_the_buffer_not_the_file(tmp_path):
    on_disk = tmp_path / "x.py"
    on_disk.write_text("x = 1\n")  # the saved file is clean; the editor buffer is not
    result = flake8("--select", "TL", "-", "--stdin-display-name", str(on_disk), stdin=BAD)
    assert parse(result.stdout) == {(str(on_disk), 4, 30, "TL004")}


def test_syntax_error_is_e999_without_traceback(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("def f(:\n    return x.transpose(0, 1).view(-1)\n")
    result = flake8("--select", "E9,TL", path)
    assert "Traceback" not in result.stderr + result.stdout
    assert [code for *_, code in parse(result.stdout)] == ["E999"]


def test_file_python_parses_but_libcst_does_not_yields_nothing():
    checker = TorchLintChecker(None, ["x = (\n"], "m.py")  # flake8 would not call it; still safe
    assert list(checker.run()) == []


def test_noqa_is_left_to_flake8(tmp_path):
    path = tmp_path / "n.py"
    path.write_text(BAD.replace(".view(-1)", ".view(-1)  # noqa: TL004"))
    assert parse(flake8("--select", "TL", path).stdout) == set()
    assert parse(flake8("--select", "TL", "--disable-noqa", path).stdout) == {(str(path), 4, 30, "TL004")}
    prefix = tmp_path / "p.py"
    prefix.write_text(BAD.replace(".view(-1)", ".view(-1)  # noqa: TL0"))
    assert parse(flake8("--select", "TL", prefix).stdout) == set()


def test_run_never_raises(monkeypatch):
    import torchlint.engine as engine

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(engine, "lint_text", boom)
    assert list(TorchLintChecker(None, BAD.splitlines(True), "m.py").run()) == []


def test_pyproject_ignore_is_honoured(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL004"]\n')
    (tmp_path / "m.py").write_text(BAD)
    assert parse(flake8("--select", "TL", "m.py", cwd=tmp_path).stdout) == set()


def test_extend_select_from_setup_cfg(tmp_path):
    # the README's flake8 snippet
    readme = (ROOT / "README.md").read_text()
    snippet = re.search(r"```ini\n(\[flake8\]\n.*?)```", readme, re.S).group(1)
    (tmp_path / "setup.cfg").write_text(snippet)
    (tmp_path / "m.py").write_text(BAD)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "flake8", "m.py"], cwd=tmp_path, capture_output=True,
                            text=True, env=env, timeout=120)
    assert "m.py:4:30: TL004" in result.stdout, result.stdout + result.stderr
