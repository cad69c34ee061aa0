"""The pre-commit hook through the real pre-commit, in temporary git repositories.

The hook repository is a snapshot of this working tree (tracked and untracked files that git does
not ignore) committed to a temporary repository: `pre-commit try-repo` of a dirty tree only takes
tracked changes, so the snapshot is what tests the tree as it is. Installing the hook must not
install torch. pre-commit's own cache goes to a temporary PRE_COMMIT_HOME.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"
CLEAN = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).reshape(-1)\n"
PRE_COMMIT = [sys.executable, "-m", "pre_commit"]

pytestmark = [pytest.mark.slow]


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def init_repo(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=path)
    git("config", "user.email", "test@example.com", cwd=path)
    git("config", "user.name", "Test", cwd=path)
    git("config", "commit.gpgsign", "false", cwd=path)


def commit_all(path: Path) -> str:
    git("add", "-A", cwd=path)
    git("commit", "-q", "--no-verify", "-m", "snapshot", cwd=path)
    return git("rev-parse", "HEAD", cwd=path).stdout.strip()


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple:
    """(path, sha) of a committed snapshot of this working tree."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    target = tmp_path_factory.mktemp("hookrepo") / "torchlint"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if not source.is_file():
            continue
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
    init_repo(target)
    return target, commit_all(target)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def run_pre_commit(args, cwd: Path, home: Path):
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never")
    env.pop("PYTHONPATH", None)  # the hook must run from its own environment, not this checkout
    return subprocess.run([*PRE_COMMIT, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=900)


def user_repo(path: Path, files: dict) -> Path:
    init_repo(path)
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    commit_all(path)
    return path


def test_try_repo_fails_on_a_finding_and_passes_when_clean(tmp_path, hook_repo, pre_commit_home):
    repo, _ = hook_repo
    bad = user_repo(tmp_path / "bad", {"train.py": BAD})
    result = run_pre_commit(["try-repo", str(repo), "torchlint", "--all-files", "--verbose"], bad, pre_commit_home)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "train.py:4:30: TL004" in output
    clean = user_repo(tmp_path / "clean", {"train.py": CLEAN, "notes.ipynb": '{"cells": [], "metadata": {}}'})
    result = run_pre_commit(["try-repo", str(repo), "torchlint", "--all-files"], clean, pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr


def assert_no_torch_in_hook_envs(home: Path) -> None:
    envs = list(home.glob("repo*/py_env-*"))
    assert envs, list(home.iterdir())
    for env in envs:
        assert list(env.glob("lib/python*/site-packages/libcst")), "the hook environment lacks libcst"
        assert not list(env.glob("lib/python*/site-packages/torch")), "installing the hook installed torch"


def readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", readme, re.S)
    assert match, "README.md has no pre-commit snippet"
    return match.group(1)


def config_from_readme(repo: Path, sha: str, args=None) -> str:
    snippet = readme_snippet()
    snippet = re.sub(r"repo: \S+", f"repo: {repo}", snippet, count=1)
    snippet = re.sub(r"rev: \S+", f"rev: {sha}", snippet, count=1)
    if args is not None:
        snippet = snippet.replace("- id: torchlint", f"- id: torchlint\n        args: {args}", 1)
    return snippet


def test_readme_snippet_force_exclude_and_fix_opt_in(tmp_path, hook_repo, pre_commit_home):
    repo, sha = hook_repo
    project = user_repo(tmp_path / "project", {
        ".pre-commit-config.yaml": config_from_readme(repo, sha),
        "pyproject.toml": '[tool.torchlint]\nextend-exclude = ["generated"]\n',
        "generated/model.py": BAD,  # passed explicitly by pre-commit, excluded by the config
        "src/model.py": CLEAN,
    })
    result = run_pre_commit(["run", "--all-files"], project, pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_no_torch_in_hook_envs(pre_commit_home)  # (try-repo uses a store of its own)
    (project / "src" / "model.py").write_text(BAD)
    result = run_pre_commit(["run", "--all-files"], project, pre_commit_home)
    assert result.returncode == 1 and "src/model.py:4:30: TL004" in result.stdout, result.stdout
    # `args: [--fix]`: the hook fixes the file, and pre-commit fails the run because it changed
    (project / ".pre-commit-config.yaml").write_text(config_from_readme(repo, sha, "[--fix]"))
    result = run_pre_commit(["run", "--all-files"], project, pre_commit_home)
    assert result.returncode == 1, result.stdout
    assert "files were modified by this hook" in result.stdout
    assert ".contiguous().view(-1)" in (project / "src" / "model.py").read_text()
    assert (project / "generated" / "model.py").read_text() == BAD
    result = run_pre_commit(["run", "--all-files"], project, pre_commit_home)
    assert result.returncode == 0, result.stdout


def test_hook_definition():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    import yaml  # installed with pre-commit

    (hook,) = yaml.safe_load(text)
    assert hook["id"] == "torchlint" and hook["entry"] == "torchlint --force-exclude"
    assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"]
    # torchlint runs its own worker pool: one process with all files, not one per CPU
    assert hook["require_serial"] is True and hook["minimum_pre_commit_version"]


def readme_try_repo_command() -> list:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^pre-commit try-repo path/to/torchlint (.*)$", readme, re.M)
    assert match, "README.md has no `pre-commit try-repo` command"
    return match.group(1).split()


def test_readme_try_repo_command(tmp_path, hook_repo, pre_commit_home):
    """The README's command, `path/to/torchlint` being a clone of this tree."""
    repo, _ = hook_repo
    bad = user_repo(tmp_path / "bad", {"train.py": BAD})
    result = run_pre_commit(["try-repo", str(repo), *readme_try_repo_command()], bad, pre_commit_home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.py:4:30: TL004" in result.stdout + result.stderr


def test_readme_rev_exists_and_its_hook_works(tmp_path, pre_commit_home):
    """The snippet's `rev` is a commit of this repository that has the hook, and pre-commit
    installs and runs the hook at that commit (from this clone instead of GitHub)."""
    rev = re.search(r"rev: (\S+)", readme_snippet()).group(1)
    assert re.fullmatch(r"[0-9a-f]{40}", rev), f"rev should be a full commit hash (no tags exist): {rev}"
    if subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip(f"this clone lacks commit {rev} (a shallow clone?)")
    assert subprocess.run(["git", "cat-file", "-e", f"{rev}:.pre-commit-hooks.yaml"], cwd=ROOT,
                          capture_output=True).returncode == 0, f"{rev} has no .pre-commit-hooks.yaml"
    bad = user_repo(tmp_path / "bad", {"train.py": BAD})
    result = run_pre_commit(["try-repo", str(ROOT), "torchlint", "--ref", rev, "--all-files"], bad, pre_commit_home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.py:4:30: TL004" in result.stdout + result.stderr
