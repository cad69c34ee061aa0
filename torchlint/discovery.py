"""Which files a run lints: explicit paths, directories recursed, excludes and .gitignore honoured
(`--no-respect-gitignore` / `respect-gitignore = false` lint what git ignores, too)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from torchlint.config import Config

LINTABLE_SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Missing:
    path: str
    reason: str


def _is_virtualenv(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


def _walk(root: str, config: Config) -> List[str]:
    found: List[str] = []
    for directory, subdirs, files in os.walk(root, followlinks=False):
        kept = []
        for name in sorted(subdirs):
            full = os.path.join(directory, name)
            if config.is_excluded(full) or (config.skip_virtualenvs and _is_virtualenv(full)):
                continue
            kept.append(name)
        subdirs[:] = kept
        for name in sorted(files):
            if name.endswith(LINTABLE_SUFFIXES):
                full = os.path.join(directory, name)
                if not config.is_excluded(full):
                    found.append(full)
    return found


def _git_ignored(paths: Sequence[str]) -> set:
    """The subset of `paths` that git ignores (empty when git or a repository is unavailable)."""
    if not paths:
        return set()
    import subprocess  # only when directories were walked

    try:
        completed = subprocess.run(
            ["git", "check-ignore", "-z", "--stdin"],
            input="\0".join(paths).encode("utf-8", "surrogateescape"),
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if completed.returncode not in (0, 1):
        return set()
    return {p for p in completed.stdout.decode("utf-8", "surrogateescape").split("\0") if p}


def collect_files(paths: Sequence[str], config: Config, force_exclude: bool = False,
                  respect_gitignore: Optional[bool] = None,
                  skipped: Optional[List[Missing]] = None) -> Tuple[List[str], List[Missing]]:
    """Files to lint, in a stable order, and the paths that could not be used. `skipped`, when
    given, receives the explicit files left out by `--force-exclude` and the walked files git
    ignores (so that a run that lints nothing can say why). `respect_gitignore` None: the config's."""
    if respect_gitignore is None:
        respect_gitignore = config.respect_gitignore
    skipped = [] if skipped is None else skipped
    files: List[str] = []
    missing: List[Missing] = []
    walked: List[str] = []
    for path in paths:
        if os.path.isdir(path):
            pattern = config.excluding_pattern(path)
            if pattern is not None:  # its files all match too: the caller warns, naming the pattern
                skipped.append(Missing(path, f"excluded by {pattern}"))
            walked.extend(_walk(path, config))
        elif os.path.lexists(path) and not os.path.exists(path):
            missing.append(Missing(path, "dangling symbolic link"))
        elif os.path.isfile(path):
            if force_exclude and config.is_excluded(path):
                skipped.append(Missing(path, "excluded"))
                continue
            files.append(path)
        elif os.path.exists(path):
            missing.append(Missing(path, "not a regular file"))
        else:
            missing.append(Missing(path, "no such file or directory"))
    ignored = _git_ignored(walked) if respect_gitignore else set()
    skipped.extend(Missing(p, "ignored by git") for p in walked if p in ignored)
    files.extend(p for p in walked if p not in ignored)
    seen = set()
    unique = []
    for path in files:
        key = os.path.normpath(path)
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique, missing
