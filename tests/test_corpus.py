"""Real code at scale: the installed torch package (thousands of files) and the real-project
corpus named in `bench/corpora.py` (by repository and commit), found through $TORCHLINT_CORPUS.

- no file of torch makes torchlint raise (no TL903 internal error), linted with the parallel
  runner and the pre-filter off, so that the same run also proves the pre-filter sound: every
  finding's rule has one of its triggers in the file (a file skipped for that rule could not
  have had the finding);
- on the real-project corpus, every file the pre-filter skips with all rules enabled gives no
  finding when linted with the pre-filter off.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

import pytest

from torchlint import engine, parallel
from torchlint.cli import LintRun
from torchlint.config import Config
from torchlint.rules import all_rules, get_rule

CORPUS_VARIABLE = "TORCHLINT_CORPUS"
HOW_TO_BUILD = (f"build it with `python bench/corpora.py fetch DIR` (the repositories and commits are named "
                f"there) and set {CORPUS_VARIABLE}=DIR/head (or any directory of real Python code)")


def corpus_dir():
    """The corpus directory, or skip saying which variable is read and how to make the corpus."""
    value = os.environ.get(CORPUS_VARIABLE)
    if not value:
        pytest.skip(f"{CORPUS_VARIABLE} is not set: {HOW_TO_BUILD}")
    path = Path(value)
    if not path.is_dir():
        pytest.skip(f"{CORPUS_VARIABLE}={value} is not a directory: {HOW_TO_BUILD}")
    return path


def torch_root():
    spec = importlib.util.find_spec("torch")  # finds the package; does not import it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def run_for(files, jobs):
    args = argparse.Namespace(jobs=jobs, no_cache=True, cache_dir=None)
    return LintRun(args, Config(), ["TL"], [], files=list(files))


def assert_sound(results):
    for result in results:
        findings = [f for f in result.findings if not f.is_diagnostic]
        if not findings:
            continue
        text = Path(result.path).read_bytes().decode("utf-8", "replace")
        # A trigger may stand in a project file this one imports (`Dropout` in model.py).
        from torchlint.analysis.project import imported_text

        text += imported_text(result.path, text)[0]
        for finding in findings:
            triggers = get_rule(finding.code).triggers
            assert not triggers or any(t in text for t in triggers), (
                f"{finding.code} fired in {result.path}:{finding.start.row} without any of its triggers {triggers}"
            )


@pytest.mark.slow
def test_every_torch_file_lints_without_internal_error(monkeypatch):
    root = torch_root()
    if root is None:
        pytest.skip("torch is not installed")
    files = sorted(str(p) for p in root.rglob("*.py"))
    assert len(files) > 1000
    monkeypatch.setattr(engine, "PREFILTER_ENABLED", False)  # inherited by the forked workers
    start = time.monotonic()
    results = parallel.lint_paths(run_for(files, jobs=max(parallel.default_jobs(), 2)))
    elapsed = time.monotonic() - start
    assert [r.path for r in results] == files
    internal = [(r.path, f.message) for r in results for f in r.findings if f.code == "TL903"]
    assert not internal, internal[:10]
    assert not any(r.internal_error for r in results)
    assert_sound(results)
    print(f"{len(files)} torch files in {elapsed:.1f} s")


@pytest.mark.slow
def test_files_the_prefilter_skips_have_no_findings():
    corpus = corpus_dir()
    paths = sorted(corpus.rglob("*.py"))
    if not paths:
        pytest.skip(f"no Python file under {CORPUS_VARIABLE}={corpus}: {HOW_TO_BUILD}")
    rules = all_rules()
    skipped = []
    for path in paths:
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not engine.could_match(text, rules):
            skipped.append((str(path), text))
    assert skipped, "the pre-filter skipped nothing: the check would be vacuous"
    try:
        engine.PREFILTER_ENABLED = False
        for path, text in skipped:
            findings = [f for f in engine.lint_text(text, path, rules).findings if not f.is_diagnostic]
            assert not findings, (path, findings)
    finally:
        engine.PREFILTER_ENABLED = True


def test_prefilter_sound_on_fixtures():
    root = Path(__file__).resolve().parent.parent / "fixtures"
    files = sorted(str(p) for p in root.rglob("*.py"))
    engine.PREFILTER_ENABLED = False
    try:
        results = parallel.lint_paths(run_for(files, jobs=1))
    finally:
        engine.PREFILTER_ENABLED = True
    assert any(r.findings for r in results)
    assert_sound(results)
