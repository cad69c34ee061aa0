"""`[tool.torchlint]` in pyproject.toml, found by walking up from the linted path.

Config is data: nothing named in it is imported or executed. Unknown keys and codes are errors
(exit 2) rather than silently ignored, because a typo in `ignore` would otherwise re-enable a rule
the user believes is off.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Sequence

CODE_PREFIX = re.compile(r"^[A-Z]{1,3}[0-9]{0,3}$")
KNOWN_KEYS = {
    "select", "ignore", "extend-select", "extend-ignore", "per-file-ignores", "exclude",
    "extend-exclude", "unsafe-fixes", "cache-dir", "min-severity", "respect-gitignore",
}
DEFAULT_EXCLUDE = [
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "*.egg-info",
    "__pycache__", "build", "dist", "node_modules", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".torchlint_cache", "site-packages", ".ipynb_checkpoints",
]


class ConfigError(Exception):
    """A user-facing configuration problem (exit code 2)."""


@dataclass
class Config:
    select: Optional[List[str]] = None  # None: all rules
    ignore: List[str] = field(default_factory=list)
    extend_select: List[str] = field(default_factory=list)
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    exclude: List[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: List[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    cache_dir: Optional[str] = None
    min_severity: Optional[str] = None  # "error", "warning" or "note"; None shows every finding
    respect_gitignore: bool = True  # leave out what git ignores when walking directories
    skip_virtualenvs: bool = True  # leave out directories with a pyvenv.cfg (--no-default-excludes: lint them)
    root: Path = field(default_factory=Path.cwd)  # the directory holding the config (or cwd)
    source: Optional[Path] = None  # the pyproject.toml it came from

    @property
    def effective_select(self) -> List[str]:
        return (self.select if self.select is not None else ["TL"]) + self.extend_select

    def ignores_for(self, path: str) -> List[str]:
        """`ignore` plus the per-file-ignores whose pattern matches `path`."""
        codes = list(self.ignore)
        if self.per_file_ignores:
            relative = self.relative(path)
            name = os.path.basename(path)
            for pattern, extra in self.per_file_ignores.items():
                if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(name, pattern):
                    codes.extend(extra)
        return codes

    def relative(self, path: str) -> str:
        try:
            return Path(os.path.abspath(path)).relative_to(self._resolved_root()).as_posix()
        except ValueError:
            return Path(path).as_posix()

    def _resolved_root(self) -> Path:
        # Resolving asks the file system about every component: once per root, not per path.
        known = self.__dict__.get("_resolved")
        if known is None or known[0] != self.root:
            known = self.__dict__["_resolved"] = (self.root, self.root.resolve())
        return known[1]

    def is_excluded(self, path: str) -> bool:
        """Whether `path` or one of its parent directories matches an exclude pattern."""
        relative = os.path.normcase(self.relative(path))
        whole, any_part, any_prefix = _compiled(tuple(self.exclude + self.extend_exclude))
        if whole is None:
            return False
        if whole(relative):
            return True
        parts = relative.split("/")
        if any_part is not None and any(map(any_part, parts)):
            return True
        return any_prefix is not None and any(any_prefix("/".join(parts[: i + 1])) for i in range(len(parts)))


    def excluding_pattern(self, path: str) -> Optional[str]:
        """The first exclude pattern that leaves `path` out (None when none does)."""
        if not self.is_excluded(path):
            return None
        for pattern in self.exclude + self.extend_exclude:
            if Config(exclude=[pattern], extend_exclude=[], root=self.root).is_excluded(path):
                return pattern
        return None


def find_pyproject(start: Path) -> Optional[Path]:
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in [directory, *directory.parents]:
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            try:
                if b"[tool.torchlint" in pyproject.read_bytes():
                    return pyproject
            except OSError:
                continue
    return None


def _codes(value, key: str, source: Path) -> List[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: `{key}` must be a list of rule codes, got {value!r}")
    validate_codes(value, f"{source}: `{key}`")
    return [v.strip().upper() for v in value]


def validate_codes(codes: Sequence[str], where: str) -> None:
    from torchlint.diagnostics import ALL as DIAGNOSTIC_CODES
    from torchlint.rule_codes import known_rule_codes  # without importing the rules (and LibCST)

    known = known_rule_codes() + list(DIAGNOSTIC_CODES)
    for code in codes:
        code = code.strip().upper()
        if code == "ALL":
            continue
        if not CODE_PREFIX.match(code):
            raise ConfigError(f"{where}: {code!r} is not a valid code (expected like TL001 or TL0)")
        if code.startswith("TL") and not any(k.startswith(code) for k in known):
            raise ConfigError(f"{where}: unknown rule code {code!r} (see `torchlint --list-rules`)")


def _strings(value, key: str, source: Path) -> List[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: `{key}` must be a list of strings, got {value!r}")
    return list(value)


def _toml():
    """The TOML parser, imported only when there is a pyproject.toml to read."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on older interpreters only
        import tomli as tomllib
    return tomllib


def load_config(start: Path, explicit: Optional[Path] = None) -> Config:
    pyproject = explicit if explicit is not None else find_pyproject(start)
    if pyproject is None:
        return Config(root=Path.cwd())
    tomllib = _toml()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {pyproject}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{pyproject}: cannot read config: {error}") from None
    table = data.get("tool", {}).get("torchlint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.torchlint] must be a table")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{pyproject}: unknown key(s) in [tool.torchlint]: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    config = Config(root=pyproject.parent, source=pyproject)
    if "select" in table:
        config.select = _codes(table["select"], "select", pyproject)
    config.ignore = _codes(table.get("ignore", []), "ignore", pyproject)
    config.ignore += _codes(table.get("extend-ignore", []), "extend-ignore", pyproject)
    config.extend_select = _codes(table.get("extend-select", []), "extend-select", pyproject)
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{pyproject}: `per-file-ignores` must be a table of glob = [codes]")
    config.per_file_ignores = {
        str(pattern): _codes(codes, f"per-file-ignores.{pattern}", pyproject) for pattern, codes in per_file.items()
    }
    if "exclude" in table:
        config.exclude = _strings(table["exclude"], "exclude", pyproject)
    config.extend_exclude = _strings(table.get("extend-exclude", []), "extend-exclude", pyproject)
    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(f"{pyproject}: `unsafe-fixes` must be true or false")
    config.unsafe_fixes = unsafe
    cache_dir = table.get("cache-dir")
    if cache_dir is not None and not isinstance(cache_dir, str):
        raise ConfigError(f"{pyproject}: `cache-dir` must be a string")
    config.cache_dir = cache_dir
    level = table.get("min-severity")
    if level is not None:
        if level not in ("error", "warning", "note"):
            raise ConfigError(f"{pyproject}: `min-severity` must be \"error\", \"warning\" or \"note\", got {level!r}")
        config.min_severity = level
    respect = table.get("respect-gitignore", True)
    if not isinstance(respect, bool):
        raise ConfigError(f"{pyproject}: `respect-gitignore` must be true or false")
    config.respect_gitignore = respect
    return config


@lru_cache(maxsize=32)
def _compiled(patterns: tuple) -> tuple:
    """The exclude patterns as three match functions, each one alternation of the patterns'
    `fnmatch` translations: (all of them: for the whole relative path; those without a slash: for
    each part of it; those with one: for each leading run of parts). A large tree's discovery
    asks once per file and directory, for each part of the path: one regex per question, not
    one per pattern. None where there is no pattern of the kind."""
    every, without_slash, with_slash = [], [], []
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        translated = f"(?:{fnmatch.translate(os.path.normcase(pattern))})"
        every.append(translated)
        (with_slash if "/" in pattern else without_slash).append(translated)
    return tuple(re.compile("|".join(group)).match if group else None
                 for group in (every, without_slash, with_slash))
