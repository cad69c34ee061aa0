"""The release of a package the program pins: `torchtext==0.6.0` in a notebook's `!pip install`
cell (masked to a comment, the text stays), in a comment or string of the file, or in a
`requirements*.txt`, `setup.py`, `setup.cfg`, `pyproject.toml` or `environment.yml` of the
file's directory or a directory above it, up to the project root. Which API exists depends on
that release (torchtext 0.6.0's `torchtext.data.Field` works beside today's torch: pure Python).

Files looked at are recorded as dependencies of the linted file (`project.read`), so that a
cached result holds only while they are unchanged (or still absent)."""

from __future__ import annotations

import os
import re
from typing import Optional, Tuple

Version = Tuple[int, ...]
_PIN_FILES = ("requirements.txt", "requirements-dev.txt", "requirements_dev.txt", "setup.py", "setup.cfg",
              "pyproject.toml", "environment.yml", "environment.yaml")
_MAX_LEVELS = 4


def _pattern(package: str) -> "re.Pattern[str]":
    # `torchtext==0.6.0`, `torchtext == 0.6`, `"torchtext<0.9"`, `torchtext<=0.8.1`; not `torchtext>=0.6`.
    return re.compile(r"(?<![\w.-])" + re.escape(package) + r"\s*(==|<=|<|~=)\s*v?(\d+(?:\.\d+)*)")


def _parse(text: str) -> Version:
    return tuple(int(part) for part in text.split("."))


def _below(text: str, pattern) -> Optional[Tuple[Version, bool]]:
    """(version, exact) of the first pin in `text`: exact for `==`/`~=`, an upper bound otherwise
    (`<` bound: versions below it; `<=`: up to it)."""
    match = pattern.search(text)
    if match is None:
        return None
    return _parse(match.group(2)), match.group(1) in ("==", "~=", "<=")


def pinned(sem, package: str) -> Optional[Tuple[Version, bool]]:
    """(version, inclusive) for the newest release of `package` the program may run with, as its
    pins say, or None when nothing pins it. `inclusive` False for a `<` bound (every release
    below the version)."""
    cache = sem.__dict__.setdefault("_pins", {})
    if package in cache:
        return cache[package]
    pattern = _pattern(package)
    code = sem.code
    found = _below(code if package in code else "", pattern)
    if found is None:
        found = _from_files(sem, pattern)
    cache[package] = found
    return found


def _from_files(sem, pattern) -> Optional[Tuple[Version, bool]]:
    path = sem.path
    if not path or path.startswith("<") or path == "-":
        return None
    project = sem.project
    directory = os.path.dirname(os.path.abspath(path))
    root = getattr(project, "root", None)
    for _ in range(_MAX_LEVELS):
        for name in _PIN_FILES:
            candidate = os.path.join(directory, name)
            text = _read(candidate, project)
            if text is not None:
                found = _below(text, pattern)
                if found is not None:
                    return found
        if root is not None and os.path.abspath(directory) == os.path.abspath(root):
            break
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return None


def _read(path: str, project) -> Optional[str]:
    if project is not None and hasattr(project, "read"):
        from torchlint.analysis.project_files import digest_of

        project.read[path] = digest_of(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(200_000)
    except OSError:
        return None


def runs_release_below(sem, package: str, release: str) -> bool:
    """Whether every release of `package` the pins allow is older than `release`."""
    found = pinned(sem, package)
    if found is None:
        return False
    version, inclusive = found
    limit = _parse(release)
    return version < limit if inclusive else version <= limit


def runs_release_at_least(sem, package: str, release: str) -> bool:
    """Whether the pinned release (`==`) is `release` or newer."""
    found = pinned(sem, package)
    return found is not None and found[1] and found[0] >= _parse(release)


__all__ = ["pinned", "runs_release_at_least", "runs_release_below"]
