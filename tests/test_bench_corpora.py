"""`bench/corpora.py`: the corpora are named by repository and commit (and wheel by version), and
a repository's lintable files at a commit are extracted from a local git snapshot or an archive."""

from __future__ import annotations

import importlib.util
import io
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def _corpora():
    spec = importlib.util.spec_from_file_location("bench_corpora", ROOT / "bench" / "corpora.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_corpus_is_pinned():
    corpora = _corpora()
    slugs = [repo.slug for repo in corpora.REPOSITORIES]
    assert len(slugs) == len(set(slugs)) and slugs
    for repo in corpora.REPOSITORIES:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", repo.slug)
        assert re.fullmatch(r"[0-9a-f]{40}", repo.head) and (repo.old is None or re.fullmatch(r"[0-9a-f]{40}", repo.old))
    for wheel in corpora.WHEELS:
        assert re.fullmatch(r"\d+(\.\d+)+", wheel.version) and wheel.packages


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_extracts_both_commits_from_a_snapshot_and_names_what_is_missing(tmp_path):
    corpora = _corpora()
    work = tmp_path / "src"
    work.mkdir()
    _git("init", "-q", cwd=work)
    (work / "old.py").write_text("x = 1\n")
    (work / "data.bin").write_bytes(b"\0")
    _git("add", "-A", cwd=work)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old", cwd=work)
    old = _git("rev-parse", "HEAD", cwd=work)
    (work / "pkg").mkdir()
    (work / "pkg" / "train.py").write_text("y = 2\n")
    (work / "nb.ipynb").write_text("{}")
    _git("add", "-A", cwd=work)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "head", cwd=work)
    head = _git("rev-parse", "HEAD", cwd=work)
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    shutil.copytree(work / ".git", snapshots / "me+demo")  # a git directory with loose objects
    repo = corpora.Repository("me/demo", head, old)
    dest = tmp_path / "out"
    messages = []
    assert corpora.fetch_repository(repo, dest, {}, snapshots, messages.append)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "head/me+demo/nb.ipynb", "head/me+demo/old.py", "head/me+demo/pkg/train.py", "old/me+demo/old.py"]
    # a snapshot that lacks a blob (a partial clone): the other files come, the missing one is named
    blob = _git("rev-parse", f"{head}:pkg/train.py", cwd=work)
    (snapshots / "me+demo" / "objects" / blob[:2] / blob[2:]).unlink()
    messages.clear()
    assert not corpora.fetch_repository(repo, dest, {}, snapshots, messages.append)
    assert any("pkg/train.py is not in" in m for m in messages)
    assert (dest / "head" / "me+demo" / "old.py").is_file()
    assert not (dest / "head" / "me+demo" / "pkg" / "train.py").exists()


def test_archives_lose_their_top_directory_and_keep_only_lintable_files(tmp_path):
    corpora = _corpora()
    members = {"demo-abc/a.py": b"a = 1\n", "demo-abc/sub/b.ipynb": b"{}", "demo-abc/README.md": b"#"}
    zipped = tmp_path / "d.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    tarred = tmp_path / "d.tar.gz"
    with tarfile.open(tarred, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    for path in (zipped, tarred):
        into = tmp_path / path.name.replace(".", "_")
        assert corpora.extract_archive(path, into) == 2
        assert sorted(p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file()) == ["a.py", "sub/b.ipynb"]
