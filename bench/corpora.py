"""The real-code corpora torchlint is measured on, named by repository and commit (tutorial and
book code) or by wheel name==version (libraries), and a command that builds them in a directory.

    python bench/corpora.py list                          # what the corpora are
    python bench/corpora.py fetch DIR                     # everything, from GitHub and PyPI
    python bench/corpora.py fetch DIR --git-dir SNAPSHOTS # repositories from local git snapshots
    python bench/corpora.py fetch DIR --archive pytorch/examples=examples.tar.gz --only repos
    TORCHLINT_CORPUS=DIR/head python -m pytest --runslow tests/test_corpus.py

Layout of DIR (what `tests/test_corpus.py` and `bench/benchmark.py --corpus` read):

    DIR/head/<owner>+<name>/...   each repository at its `head` commit (the newest when measured)
    DIR/old/<owner>+<name>/...    the same repository at its 2017-18 `old` commit, where one is named
    DIR/libraries/<package>/...   the package directory of each wheel (`pip download --no-deps`)
    DIR/COMMITS.txt               one line a repository: `<owner>+<name> <head> [old=<old>]`

Only `.py`, `.pyi` and `.ipynb` files are extracted. Where a repository comes from, first match:
1. `--archive owner/name=PATH`: a `.tar`, `.tar.gz` or `.zip` of the repository's files (GitHub's
   "Download ZIP" of the commit). It holds one commit only: it is used for `head`, and `old` is
   skipped unless a git source has it.
2. `--git-dir DIR`: a directory of local git snapshots, one per repository, named `owner+name`
   (a bare git directory, or one holding `repo/` or `repo/.git`, or a clone with `.git/`). The
   commits are read with `git archive`, so a snapshot must hold them (a shallow clone may not).
3. Otherwise `git clone --bare --filter=blob:none https://github.com/owner/name` into
   `DIR/.git-cache/` (needs network access to GitHub).
Wheels come from `pip download --no-deps name==version` (needs a package index) or, with
`--wheel-dir DIR`, from wheels already there. A source that fails is reported and skipped; the
exit status is 1 when anything was skipped.

Nothing here imports torch or torchlint. Standard library only.
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Repository:
    slug: str  # owner/name on GitHub
    head: str  # the commit measured as "newest"
    old: Optional[str] = None  # a 2017-18 commit of the same repository (PyTorch 0.2-1.0 code)

    @property
    def dirname(self) -> str:
        return self.slug.replace("/", "+")


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    packages: tuple  # top-level package directories inside the wheel

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


# Tutorial, course and book code: the "Precision on real code" rows (docs/precision.md) for tutorial and book
# code (newest commits and 2017-18 snapshots). That table also names d2l-pytorch,
# Dive-into-DL-PyTorch, L1aoXingyu's book code and deeplearningzerotoall's PyTorch lessons, whose
# commits were not recorded; they are not listed here until they are.
REPOSITORIES: List[Repository] = [
    Repository("MorvanZhou/PyTorch-Tutorial", "dbe154a9e56635e51c6b0c2ccea8ae36cfb585a7",
               "f2ebd8a37bf1ef3887d9cba1ee01b1f107430f11"),
    Repository("Shawn1993/cnn-text-classification-pytorch", "93415f08168a1ae60635320569f6eca0ae3a40bb",
               "502d9b0542f9397e52a3355cc3d7ac16be7cc5c7"),
    Repository("SherlockLiao/pytorch-beginner", "3c48d7eae315d4b01ef36eab711efcd528a87744",
               "c8a5d8a7244f8696e33df4ea8e66f4cdfd51fabb"),
    Repository("bearpaw/pytorch-classification", "24f1c456f48c78133088c4eefd182ca9e6199b03",
               "803ce406265d5c0c4779ae8f4524376a5628ddf0"),
    Repository("bentrevett/pytorch-seq2seq", "b3cd54c72cd6e4e63f672d334c795b4fe744ef92"),
    Repository("chenyuntc/pytorch-book", "688951721d11cd3f92440801e1b68b65ae2e439f",
               "86ee77842f5e40d7396a2f57bc334a8b585aa7ba"),
    Repository("eriklindernoren/PyTorch-GAN", "36d3c77e5ff20ebe0aeefd322326a134a279b93e",
               "7ad646dbb755e48887a7a3918ae481317f336cf9"),
    Repository("graykode/nlp-tutorial", "d05e31ec81d56d70c1db89b99ab07e948f7ebc11"),
    Repository("hunkim/PyTorchZeroToAll", "e5a260fac0b4ff1e2ec434fc6f0d962ac97fc289",
               "edd7ba1f19a8d2e74188d6caf6b020dc20130e53"),
    Repository("jcjohnson/pytorch-examples", "0003fcdc606a79951e53bf8f46f8574fa4739f23",
               "c606f2c08d84a922a7994d64354f0a6b1d8dcd6f"),
    Repository("karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"),
    Repository("kuangliu/pytorch-cifar", "49b7aa97b0c12fe0d4054e670403a16b6b834ddd",
               "bf78d3b8b358c4be7a25f9f9438c842d837801fd"),
    Repository("mrdbourke/pytorch-deep-learning", "baa27b691617461c173ecf3439793cd8cde74e13"),
    Repository("pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8",
               "f83508117b1ba9b752b227de992799093af3b215"),
    Repository("spro/practical-pytorch", "c520c52e68e945d88fff563dba1c028b6ec0197b",
               "a7c4ecdc500a7b49d19d72b4cd76dc4b8d36acfe"),
    Repository("udacity/deep-learning-v2-pytorch", "c9404fc86181fc3f0906b368697268257f348535"),
    Repository("utkuozbulak/pytorch-cnn-visualizations", "ba22fa07c9f31964e6cfa669e80f3461e11c4ebc",
               "ff2ec0c028b1c8e8839796895b83016d44f4be5a"),
    Repository("weiaicunzai/pytorch-cifar100", "11d8418f415b261e4ae3cb1ffe20d06ec95b98e4",
               "4311acdbd248b3eb342ce69bc9c9b0a0fc32e356"),
    Repository("yunjey/pytorch-tutorial", "0500d3df5a2a8080ccfccbc00aca0eacc21818db",
               "92195268694e4f78e8dd78c5bb60e373d4b9f92e"),
]

# Library code: the library rows of docs/precision.md and `bench/benchmark.py`'s library corpus. timm,
# torchvision and lightning are the wheels the measurements of 2026-12-03 used; transformers'
# version was not recorded then: 5.25.0 is the newest on PyPI on 2026-12-04.
WHEELS: List[Wheel] = [
    Wheel("timm", "1.0.31", ("timm",)),
    Wheel("torchvision", "0.29.1", ("torchvision",)),
    Wheel("lightning", "2.6.6", ("lightning",)),
    Wheel("transformers", "5.25.0", ("transformers",)),
]


class SourceError(Exception):
    pass


# --- repositories --------------------------------------------------------------------------------

def _git(*args: str, git_dir: Optional[Path] = None, **kwargs) -> subprocess.CompletedProcess:
    command = ["git"] + ([f"--git-dir={git_dir}"] if git_dir is not None else []) + list(args)
    return subprocess.run(command, capture_output=True, **kwargs)


def _snapshot(root: Path, repo: Repository) -> Optional[Path]:
    """The git directory of `repo` under a directory of snapshots, if there is one."""
    base = root / repo.dirname
    for candidate in (base / "repo" / ".git", base / "repo", base / ".git", base):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def _clone(cache: Path, repo: Repository) -> Path:
    target = cache / f"{repo.dirname}.git"
    if not (target / "HEAD").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        done = _git("clone", "--quiet", "--bare", "--filter=blob:none", f"https://github.com/{repo.slug}.git",
                    str(target), timeout=600)
        if done.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            raise SourceError(f"git clone failed: {done.stderr.decode(errors='replace').strip()}")
    return target


def _wanted(name: str) -> bool:
    return name.endswith(SUFFIXES)


def _safe_target(into: Path, member: str) -> Optional[Path]:
    parts = [p for p in Path(member).parts if p not in ("", ".")]
    if not parts or ".." in parts or Path(member).is_absolute():
        return None
    return into.joinpath(*parts)


def _extract_tar(data: bytes, into: Path, strip: int = 0) -> int:
    count = 0
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive:
            if not member.isfile() or not _wanted(member.name):
                continue
            name = "/".join(member.name.split("/")[strip:])
            target = _safe_target(into, name)
            source = archive.extractfile(member)
            if target is None or source is None:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read())
            count += 1
    return count


def _extract_zip(path: Path, into: Path, strip: int = 0, keep=_wanted) -> int:
    count = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.is_dir() or not keep(info.filename):
                continue
            target = _safe_target(into, "/".join(info.filename.split("/")[strip:]))
            if target is None:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(info))
            count += 1
    return count


def _common_top(files: Iterable[str]) -> int:
    """1 when every file sits under one top directory (GitHub's `name-<commit>/`), else 0."""
    files = [name.strip("/") for name in files if name.strip("/")]
    tops = {name.split("/", 1)[0] for name in files}
    return 1 if files and len(tops) == 1 and all("/" in name for name in files) else 0


def extract_commit(git_dir: Path, commit: str, into: Path) -> Tuple[int, List[str]]:
    """Write the lintable files of `commit` under `into`: (files written, paths whose blob the git
    directory lacks). Only those blobs are read (`ls-tree` + `cat-file --batch`), so a snapshot
    without the large data files (a partial clone) still works."""
    if _git("cat-file", "-e", f"{commit}^{{commit}}", git_dir=git_dir).returncode != 0:
        raise SourceError(f"commit {commit} is not in {git_dir} (a shallow snapshot?)")
    listing = _git("ls-tree", "-r", "-z", commit, git_dir=git_dir, timeout=600)
    if listing.returncode != 0:
        raise SourceError(f"git ls-tree {commit} failed: {listing.stderr.decode(errors='replace').strip()}")
    entries = []
    for record in listing.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, kind, sha = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if kind == b"blob" and mode != b"120000" and _wanted(path):
            entries.append((sha.decode(), path))
    request = "".join(f"{sha}\n" for sha, _ in entries).encode()
    batch = _git("cat-file", "--batch", git_dir=git_dir, input=request, timeout=600)
    data, offset, missing = batch.stdout, 0, []
    for sha, path in entries:
        end = data.index(b"\n", offset)
        header = data[offset:end].split()
        offset = end + 1
        if len(header) < 3 or header[1] != b"blob":  # `<sha> missing`
            missing.append(path)
            continue
        size = int(header[2])
        target = _safe_target(into, path)
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[offset:offset + size])
        offset += size + 1
    return len(entries) - len(missing), missing


def extract_archive(path: Path, into: Path) -> int:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            strip = _common_top(info.filename for info in archive.infolist() if not info.is_dir())
        return _extract_zip(path, into, strip)
    data = path.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        strip = _common_top(member.name for member in archive.getmembers() if member.isfile())
    return _extract_tar(data, into, strip)


def fetch_repository(repo: Repository, dest: Path, archives: Dict[str, Path], git_root: Optional[Path],
                     log) -> bool:
    """Build DIR/head/<repo> (and DIR/old/<repo>); False when something was skipped."""
    complete = True
    git_dir = _snapshot(git_root, repo) if git_root is not None else None
    if repo.slug in archives:
        into = _fresh(dest / "head" / repo.dirname)
        log(f"{repo.slug}: head from {archives[repo.slug]}: {extract_archive(archives[repo.slug], into)} files")
    else:
        if git_dir is None:
            if git_root is not None:
                log(f"{repo.slug}: no snapshot under {git_root}; cloning from GitHub")
            git_dir = _clone(dest / ".git-cache", repo)
        complete &= _commit(repo, "head", repo.head, git_dir, dest, log)
    if repo.old is not None:
        if git_dir is None:
            log(f"{repo.slug}: old {repo.old[:12]} skipped: an archive holds one commit; pass --git-dir")
            return False
        try:
            complete &= _commit(repo, "old", repo.old, git_dir, dest, log)
        except SourceError as error:
            log(f"{repo.slug}: old skipped: {error}")
            complete = False
    return complete


def _commit(repo: Repository, label: str, commit: str, git_dir: Path, dest: Path, log) -> bool:
    written, missing = extract_commit(git_dir, commit, _fresh(dest / label / repo.dirname))
    log(f"{repo.slug}: {label} {commit[:12]}: {written} files")
    for path in missing:
        log(f"{repo.slug}: {label}: {path} is not in {git_dir} (a partial snapshot); left out")
    return not missing


def _fresh(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


# --- wheels --------------------------------------------------------------------------------------

def _find_wheel(directory: Path, wheel: Wheel) -> Optional[Path]:
    stem = wheel.name.replace("-", "_")
    matches = sorted(directory.glob(f"{stem}-{wheel.version}-*.whl"))
    return matches[0] if matches else None


def fetch_wheel(wheel: Wheel, dest: Path, wheel_dir: Optional[Path], log) -> None:
    found = _find_wheel(wheel_dir, wheel) if wheel_dir is not None else None
    if found is None:
        download = dest / ".wheels"
        download.mkdir(parents=True, exist_ok=True)
        found = _find_wheel(download, wheel)
        if found is None:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                                   "--only-binary=:all:", "-d", str(download), wheel.requirement],
                                  capture_output=True, timeout=1200)
            found = _find_wheel(download, wheel)
            if done.returncode != 0 or found is None:
                raise SourceError(f"pip download --no-deps {wheel.requirement} failed: "
                                  f"{done.stderr.decode(errors='replace').strip()[-300:]}")
    into = _fresh(dest / "libraries" / wheel.name)
    count = _extract_zip(found, into, keep=lambda n: _wanted(n) and n.split("/", 1)[0] in wheel.packages)
    log(f"{wheel.requirement}: {count} files from {found.name}")


# --- command -------------------------------------------------------------------------------------

def write_commits(dest: Path) -> None:
    lines = [f"{r.dirname} {r.head}" + (f" old={r.old}" if r.old else "") for r in REPOSITORIES]
    lines += [f"wheel {w.requirement}" for w in WHEELS]
    (dest / "COMMITS.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def list_corpora(stream=sys.stdout) -> None:
    stream.write("repositories (GitHub, head commit [old commit]):\n")
    for repo in REPOSITORIES:
        stream.write(f"  {repo.slug:<42} {repo.head}" + (f" old={repo.old}" if repo.old else "") + "\n")
    stream.write("wheels (pip download --no-deps):\n")
    for wheel in WHEELS:
        stream.write(f"  {wheel.requirement}\n")


def _archives(values: List[str]) -> Dict[str, Path]:
    archives = {}
    for value in values:
        slug, sep, path = value.partition("=")
        if not sep or "/" not in slug:
            raise SystemExit(f"--archive expects owner/name=PATH, got {value!r}")
        archives[slug] = Path(path)
    return archives


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/corpora.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="print the corpora")
    fetch = commands.add_parser("fetch", help="build the corpora in a directory")
    fetch.add_argument("dest", type=Path)
    fetch.add_argument("--only", choices=("repos", "wheels"), help="only the repositories or only the wheels")
    fetch.add_argument("--repo", action="append", default=[], help="only this owner/name (repeatable)")
    fetch.add_argument("--git-dir", type=Path, help="directory of local git snapshots named owner+name")
    fetch.add_argument("--archive", action="append", default=[], metavar="OWNER/NAME=PATH",
                       help="a .tar/.tar.gz/.zip of one repository's files at its head commit (repeatable)")
    fetch.add_argument("--wheel-dir", type=Path, help="a directory that already holds the wheels")
    args = parser.parse_args(argv)
    if args.command == "list":
        list_corpora()
        return 0
    dest = args.dest
    dest.mkdir(parents=True, exist_ok=True)
    archives = _archives(args.archive)

    def log(text: str) -> None:
        sys.stderr.write(text + "\n")

    failed = []
    if args.only != "wheels":
        for repo in REPOSITORIES:
            if args.repo and repo.slug not in args.repo:
                continue
            try:
                if not fetch_repository(repo, dest, archives, args.git_dir, log):
                    failed.append(repo.slug + " (in part)")
            except (SourceError, OSError, subprocess.SubprocessError, tarfile.TarError, zipfile.BadZipFile) as error:
                log(f"{repo.slug}: skipped: {error}")
                failed.append(repo.slug)
    if args.only != "repos" and not args.repo:
        for wheel in WHEELS:
            try:
                fetch_wheel(wheel, dest, args.wheel_dir, log)
            except (SourceError, OSError, subprocess.SubprocessError, zipfile.BadZipFile) as error:
                log(f"{wheel.requirement}: skipped: {error}")
                failed.append(wheel.requirement)
    write_commits(dest)
    if failed:
        log(f"not built: {', '.join(failed)}")
        return 1
    log(f"corpora in {dest} (tests/test_corpus.py: TORCHLINT_CORPUS={dest / 'head'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
