"""The project root of a file: the nearest directory above it holding `pyproject.toml`,
`setup.py`, `setup.cfg` or `.git`, else the file's own directory. One definition for the lint's
project layer (`analysis/project.py`) and for `torchlint run` (`runtime/project.py`), so both
call the same files the user's. Imports nothing but `os`."""

from __future__ import annotations

import os

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def find_root(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    current = directory
    while True:
        if any(os.path.exists(os.path.join(current, marker)) for marker in ROOT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return directory
        current = parent
