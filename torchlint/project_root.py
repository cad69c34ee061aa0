"""The project root of a file: the nearest directory above it holding `pyproject.toml`,
`setup.py`, `setup.cfg` or `.git`, else the file's own directory. One definition for the lint's
project layer (`analysis/project.py`) and for `torchlint run` (`runtime/project.py`), so both
call the same files the user's. Imports nothing but `os` (and `typing`)."""

from __future__ import annotations

import os
from typing import Dict, Optional

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def find_root(path: str, memo: Optional[Dict[str, Optional[str]]] = None) -> str:
    """The project root of the file at `path`. `memo` (directory -> the nearest directory at or
    above it holding a marker, None for none), when given, is read and filled: files of one tree
    then stat the markers of each directory once instead of once per file."""
    directory = os.path.dirname(os.path.abspath(path))
    climbed = []
    current = directory
    while True:
        if memo is not None and current in memo:
            marked = memo[current]
            break
        climbed.append(current)
        if any(os.path.exists(os.path.join(current, marker)) for marker in ROOT_MARKERS):
            marked = current
            break
        parent = os.path.dirname(current)
        if parent == current:
            marked = None
            break
        current = parent
    if memo is not None:
        for each in climbed:
            memo[each] = marked
    return directory if marked is None else marked
