"""Every command in README.md is run by a test, as the README writes it (a placeholder path such
as `src/` or `path/to/torchlint` is made to exist). A command added to the README without a test
here fails `test_every_readme_command_has_a_test`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent

INSTALL_AND_DEMO = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/torchlint fixtures/"
TEST_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e '.[test,verify]' "
                "&& .venv/bin/python -m pytest -n 2")
QUICK_START = [
    "torchlint src/",
    "torchlint --fix src/",
    "torchlint --select TL0 --ignore TL004 src/",
    "torchlint --statistics src/",
    "torchlint --list-rules",
]
# command -> the test that runs it
COVERED = {
    INSTALL_AND_DEMO: "test_install_and_lint_the_demo (slow)",
    TEST_COMMAND: "test_ci_runs_the_readme_test_command (.ci/run runs it)",
    "torchlint train.py": "test_example_output_is_what_the_readme_shows",
    "torchlint --select TL301 fixtures/TL301/cifar_kernel_edit.py": "test_shape_example_output_is_what_the_readme_shows",
    **{command: "test_quick_start_commands" for command in QUICK_START},
    "pre-commit try-repo path/to/torchlint torchlint --all-files --verbose":
        "tests/test_precommit.py::test_readme_try_repo_command (slow)",
    "flake8 train.py": "test_flake8_on_the_example",
    "torchlint run fixtures/run/tl002_bad.py": "test_run_and_verify_commands (slow)",
    "torchlint --verify TL004": "test_run_and_verify_commands (slow)",
    "torchlint --output-format sarif --output-file torchlint.sarif --exit-zero .": "test_workflow_sarif_step",
    "torchlint --output-format github .": "test_workflow_sarif_step",
}


def blocks(language: str) -> list:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def readme_commands() -> set:
    commands = set()
    for block in blocks("sh"):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.add(line)
    for block in blocks("console"):
        commands.update(line[2:].strip() for line in block.splitlines() if line.startswith("$ "))
    for block in blocks("yaml"):  # the workflow's torchlint steps
        commands.update(m.strip() for m in re.findall(r"- run: (torchlint .*)", block))
    commands.update(re.findall(r"run\n`(torchlint --output-format github \.)`", README))
    return commands


def env(**extra) -> dict:
    result = dict(os.environ, NO_COLOR="1", **extra)
    result.pop("FORCE_COLOR", None)
    result["PATH"] = f"{BIN}{os.pathsep}{result.get('PATH', '')}"
    result["PYTHONPATH"] = str(ROOT)
    return result


def shell(command: str, cwd: Path, timeout: int = 300, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          env=env(**extra), timeout=timeout)


def example(tmp_path: Path) -> Path:
    (python,) = [b for b in blocks("python") if "losses.append(loss)" in b]
    (tmp_path / "train.py").write_text(python, encoding="utf-8")
    return tmp_path


def test_every_readme_command_has_a_test():
    missing = readme_commands() - set(COVERED)
    assert not missing, f"README commands no test runs (add them to COVERED and a test): {sorted(missing)}"
    stale = set(COVERED) - readme_commands()
    assert not stale, f"COVERED names commands the README no longer has: {sorted(stale)}"


def test_example_output_is_what_the_readme_shows(tmp_path):
    (console,) = [b for b in blocks("console") if b.startswith("$ torchlint train.py\n")]
    expected = console.split("\n", 1)[1]
    result = shell("torchlint --no-cache train.py", example(tmp_path))
    assert result.returncode == 1, result.stderr
    assert result.stdout == expected


def test_shape_example_output_is_what_the_readme_shows():
    (console,) = [b for b in blocks("console") if b.startswith("$ torchlint --select TL301 ")]
    command, expected = console.split("\n", 1)
    result = shell(command[2:] + " --no-cache", ROOT)
    assert result.returncode == 1, result.stderr
    assert result.stdout == expected


def test_quick_start_commands(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    example(src)
    results = [shell(command + " --no-cache" * ("--list-rules" not in command), tmp_path) for command in QUICK_START]
    lint, fix, select, statistics, list_rules = results
    assert lint.returncode == 1 and "Found 3 findings" in lint.stdout, lint.stdout + lint.stderr
    assert fix.returncode == 1 and "1 fixed" in fix.stdout, fix.stdout + fix.stderr
    assert "losses.append(loss.detach())" in (src / "train.py").read_text()
    assert select.returncode == 1 and "TL0" in select.stdout and "TL108" not in select.stdout
    assert statistics.returncode == 1 and re.search(r"^\s*1\s+TL002\s", statistics.stdout, re.M), statistics.stdout
    assert list_rules.returncode == 0 and "TL001" in list_rules.stdout


def test_flake8_on_the_example(tmp_path):
    (ini,) = blocks("ini")
    example(tmp_path)
    (tmp_path / "setup.cfg").write_text(ini, encoding="utf-8")
    result = shell("flake8 train.py", tmp_path, timeout=120)
    assert result.returncode == 1
    codes = set(re.findall(r"^train\.py:\d+:\d+: (TL\d{3})", result.stdout, re.M))
    assert codes == {"TL002", "TL003", "TL108"}, result.stdout + result.stderr


def test_workflow_sarif_step(tmp_path):
    import json

    example(tmp_path)
    result = shell("torchlint --output-format sarif --output-file torchlint.sarif --exit-zero .", tmp_path)
    assert result.returncode == 0, result.stderr
    sarif = json.loads((tmp_path / "torchlint.sarif").read_text())
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} == {"TL002", "TL003", "TL108"}
    result = shell("torchlint --output-format github .", tmp_path)
    assert result.returncode == 1 and result.stdout.startswith("::error file=./train.py,line=11,"), result.stdout


def test_ci_runs_the_readme_test_command():
    assert TEST_COMMAND in README
    assert (ROOT / ".ci" / "run").read_text().rstrip().splitlines()[-1] == TEST_COMMAND
    assert TEST_COMMAND in (ROOT / "CONTRIBUTING.md").read_text()


@pytest.mark.slow
def test_run_and_verify_commands():
    pytest.importorskip("torch")
    result = shell("torchlint run fixtures/run/tl002_bad.py", ROOT, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "TL002 CONFIRMED error" in result.stdout
    result = shell("torchlint --verify TL004", ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CONFIRMED" in result.stdout


@pytest.mark.slow
def test_install_and_lint_the_demo(tmp_path):
    """The first set-up command, verbatim, in a copy of this tree (pip installs from the index)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp_path / name)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "FORCE_COLOR")}
    environment["NO_COLOR"] = "1"
    result = subprocess.run(["bash", "-c", INSTALL_AND_DEMO], cwd=tmp_path, capture_output=True, text=True,
                            env=environment, timeout=900)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]  # findings: the README says so
    assert re.search(r"^Found \d+ findings: \d+ errors, \d+ warnings, \d+ notes\.$", result.stdout, re.M)
    assert not list((tmp_path / ".venv").glob("lib/python*/site-packages/torch"))
