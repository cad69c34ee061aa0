"""Exclude patterns: a path is excluded when the whole path relative to the project root, a part of
it (for a pattern without a slash) or a leading run of its parts (for a pattern with one) matches a
pattern as `fnmatch` matches. `Config.is_excluded` asks all patterns at once; this checks it against
the definition, one pattern at a time."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchlint.config import DEFAULT_EXCLUDE, Config


def _by_definition(config: Config, path: str) -> bool:
    relative = os.path.normcase(config.relative(path))
    parts = relative.split("/")
    for pattern in config.exclude + config.extend_exclude:
        pattern = pattern.rstrip("/")
        matches = re.compile(fnmatch.translate(os.path.normcase(pattern))).match
        if matches(relative):
            return True
        if "/" not in pattern and any(matches(part) for part in parts):
            return True
        if "/" in pattern and any(matches("/".join(parts[: i + 1])) for i in range(len(parts))):
            return True
    return False


_PART = st.sampled_from(["src", "build", "dist", "model.py", "a", "gen", "x.egg-info", ".venv", "data", "b.py",
                         "generated", "tests", "__pycache__", "nested", "site-packages", ""])
_PATTERN = st.sampled_from(["generated", "src/gen", "*.py", "tests/*", "a/b.py", "data/", "nested/*/x", "?.py",
                            "[ab]", "", "/", "build/*.py", "src*py", "*gen*", "a/*"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_PART, min_size=1, max_size=5), extra=st.lists(_PATTERN, max_size=4),
       defaults=st.booleans(), inside=st.booleans())
def test_all_patterns_at_once_agree_with_one_at_a_time(tmp_path_factory, parts, extra, defaults, inside):
    root = tmp_path_factory.getbasetemp() / "project"
    config = Config(exclude=list(DEFAULT_EXCLUDE) if defaults else [], extend_exclude=extra, root=root)
    path = os.path.join(str(root) if inside else "/elsewhere", *parts)
    assert config.is_excluded(path) == _by_definition(config, path)


@pytest.mark.parametrize("relative, patterns, excluded", [
    ("src/gen/model.py", ["src/gen"], True),  # a leading run of parts, for a pattern with a slash
    ("src/generated.py", ["src/gen"], False),
    ("src/model.py", ["src*py"], True),  # the whole path: `*` crosses slashes as fnmatch's does
    ("a/build/x.py", DEFAULT_EXCLUDE, True),  # a part, for a pattern without one
    ("a/builder/x.py", DEFAULT_EXCLUDE, False),
    ("nested/q/x/y.py", ["nested/*/x"], True),
    ("pkg/x.egg-info/y.py", DEFAULT_EXCLUDE, True),
    ("model.py", [], False),
])
def test_examples_each_way_a_pattern_excludes(tmp_path, relative, patterns, excluded):
    config = Config(exclude=list(patterns), root=tmp_path)
    path = str(tmp_path / relative)
    assert config.is_excluded(path) is excluded
    assert _by_definition(config, path) is excluded


def test_the_root_is_resolved_again_when_it_changes(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    config = Config(exclude=["one"], root=tmp_path)
    assert config.is_excluded(str(tmp_path / "one" / "a.py"))
    config.root = tmp_path / "one"
    assert not config.is_excluded(str(tmp_path / "one" / "a.py"))
    assert config.relative(str(tmp_path / "one" / "a.py")) == "a.py"
    assert Path(config.relative(str(tmp_path / "two" / "b.py"))).is_absolute()
