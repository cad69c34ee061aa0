"""`--fix` / `--unsafe-fixes` / `--diff`: golden files, the CLI contract, and never corrupting a file.

Golden files: `fixtures/fixes/TLnnn_<name>.py` is fixed with only rule TLnnn selected; the result
must equal `.py.fixed` (safe fixes) and `.py.unsafe-fixed` (with unsafe fixes) byte for byte.
Regenerate after a deliberate change with `TORCHLINT_UPDATE_GOLDEN=1 pytest tests/test_fix.py`
and read the diff before committing it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchlint import atomic
from torchlint.engine import lint_source, select_rules
from torchlint.finding import Applicability, Edit, Finding, Fix, Location
from torchlint.fixer import apply_fixes, dump_notebook, fix_data, fix_text, parses

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GOLDEN_DIR = FIXTURES / "fixes"
GOLDEN = sorted(GOLDEN_DIR.glob("TL*.py"))
UPDATE = bool(os.environ.get("TORCHLINT_UPDATE_GOLDEN"))
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"
FIXED = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).contiguous().view(-1)\n"
UNSAFE_ONLY = (
    "import torch.nn.functional as F\n\n"
    "def f(logits, target):\n    return F.cross_entropy(F.softmax(logits, dim=1), target)\n"
)


def torchlint(*args: str, cwd: Path = ROOT, stdin=None, text=True):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "torchlint", "--no-cache", *args],
        cwd=cwd, input=stdin, capture_output=True, text=text, env=env, timeout=300,
    )


def tree_hashes(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# --- golden files ----------------------------------------------------------------------------

@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("path", GOLDEN, ids=[p.name for p in GOLDEN])
def test_golden(path: Path, unsafe: bool) -> None:
    code = path.name.split("_")[0]
    rules = select_rules([code])
    data = path.read_bytes()
    fixed = fix_data(str(path), data, rules, unsafe)
    golden = path.with_name(path.name + (".unsafe-fixed" if unsafe else ".fixed"))
    if UPDATE:
        golden.write_bytes(fixed.new)
    assert golden.exists(), f"missing golden file {golden.name} (TORCHLINT_UPDATE_GOLDEN=1 writes it)"
    assert fixed.new == golden.read_bytes(), f"{golden.name} differs from what --fix produces"
    assert not any(f.is_diagnostic for f in fixed.result.findings), fixed.result.findings
    # A finding that was fixed does not come back, and a second run changes nothing.
    again = fix_data(str(path), fixed.new, rules, unsafe)
    assert again.new == fixed.new
    assert not any(f.fix and (unsafe or f.fix.applicability == Applicability.SAFE)
                   for f in again.result.findings)


def test_every_fixable_rule_has_a_golden_file() -> None:
    from torchlint.rules import all_rules

    covered = {p.name.split("_")[0] for p in GOLDEN}
    fixable = {rule.code for rule in all_rules() if rule.fix_availability != "none"}
    assert fixable <= covered, f"fixable rules without fixtures/fixes/ golden files: {sorted(fixable - covered)}"
    for path in GOLDEN:
        source = path.read_text(encoding="utf-8")
        code = path.name.split("_")[0]
        findings = [f for f in lint_source(source, str(path), select=[code]) if f.code == code]
        assert any(f.fix for f in findings), f"{path.name} has no fixable {code} finding"


# --- applying edits --------------------------------------------------------------------------

def _finding(code, edits, applicability=Applicability.SAFE) -> Finding:
    return Finding(code, "m", "<s>", Location(1, 1), Location(1, 1),
                   fix=Fix("f", tuple(Edit(c, Location(*s), Location(*e)) for c, s, e in edits), applicability))


def test_overlapping_fixes_wait_for_the_next_pass() -> None:
    text = "abcdef\n"
    first = _finding("TL001", [("X", (1, 2), (1, 4))])
    overlapping = _finding("TL002", [("Y", (1, 3), (1, 5))])
    later = _finding("TL003", [("Z", (1, 6), (1, 7))])
    new, counts = apply_fixes(text, [later, overlapping, first])
    assert new == "aXdeZ\n"
    assert counts == {"TL001": 1, "TL003": 1}


def test_identical_edits_count_for_both_findings() -> None:
    one = _finding("TL001", [("X", (1, 1), (1, 2))])
    two = _finding("TL001", [("X", (1, 1), (1, 2))])
    assert apply_fixes("ab\n", [one, two]) == ("Xb\n", {"TL001": 2})


def test_unsafe_fixes_need_the_flag() -> None:
    unsafe = _finding("TL001", [("X", (1, 1), (1, 2))], Applicability.UNSAFE)
    assert apply_fixes("ab\n", [unsafe])[0] == "ab\n"
    assert apply_fixes("ab\n", [unsafe], unsafe=True)[0] == "Xb\n"


def test_positions_are_code_points_and_rows_split_on_any_newline() -> None:
    text = "é = 1\r\nx\ry = 'ü'.view\n"
    # row 3 is `y = 'ü'.view`; `view` starts at column 9
    edit = _finding("TL004", [("contiguous().view", (3, 9), (3, 13))])
    assert apply_fixes(text, [edit])[0] == "é = 1\r\nx\ry = 'ü'.contiguous().view\n"


def test_inserted_lines_use_the_file_newline() -> None:
    edit = _finding("TL002", [("a()\n    ", (2, 5), (2, 5))])
    assert apply_fixes("for x in y:\r\n    b()\r\n", [edit])[0] == "for x in y:\r\n    a()\r\n    b()\r\n"


def test_fix_that_breaks_the_code_leaves_the_file_unchanged(monkeypatch, tmp_path) -> None:
    import torchlint.fixer as fixer

    real = fixer.apply_fixes
    monkeypatch.setattr(fixer, "apply_fixes", lambda text, *a, **k: (text + "(\n", real(text, *a, **k)[1]))
    path = tmp_path / "bad.py"
    path.write_text(BAD)
    fixed = fix_data(str(path), BAD.encode(), select_rules(["TL004"]), False)
    assert not fixed.changed and not fixed.fixed
    messages = [f.message for f in fixed.result.findings if f.is_diagnostic]
    assert messages and "fix produced invalid code; file left unchanged" in messages[0]
    assert [f.code for f in fixed.result.findings if not f.is_diagnostic] == ["TL004"]


def test_passes_are_bounded_and_converge() -> None:
    # Three chained views, each needing its own edit: one pass takes them all (no overlap).
    # (Each view keeps two dimensions: `.t()` of a 1-D view would be a no-op, and not flagged.)
    text = "import torch\ny = x.t().view(4, -1).t().view(2, -1).t().view(-1)\n"
    outcome = fix_text(text, "<s>", select_rules(["TL004"]))
    assert outcome.count == 3 and parses(outcome.text)
    assert fix_text(outcome.text, "<s>", select_rules(["TL004"])).count == 0


# --- encodings, BOM, line endings, permissions ------------------------------------------------

@pytest.mark.parametrize("variant", ["crlf", "bom", "latin1", "cr"])
def test_round_trip_keeps_bytes_outside_the_fix(tmp_path, variant) -> None:
    text = "# é\n" + BAD
    if variant == "crlf":
        data = text.replace("\n", "\r\n").encode("utf-8")
        expected = ("# é\n" + FIXED).replace("\n", "\r\n").encode("utf-8")
    elif variant == "cr":
        data = text.replace("\n", "\r").encode("utf-8")
        expected = ("# é\n" + FIXED).replace("\n", "\r").encode("utf-8")
    elif variant == "bom":
        data = b"\xef\xbb\xbf" + text.encode("utf-8")
        expected = b"\xef\xbb\xbf" + ("# é\n" + FIXED).encode("utf-8")
    else:
        data = ("# -*- coding: latin-1 -*-\n" + text).encode("latin-1")
        expected = ("# -*- coding: latin-1 -*-\n# é\n" + FIXED).encode("latin-1")
    path = tmp_path / "m.py"
    path.write_bytes(data)
    result = torchlint("--fix", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_bytes() == expected
    assert "Found 1 finding (1 fixed, 0 remaining)." in result.stdout


def test_crlf_inserted_line(tmp_path) -> None:
    source = (GOLDEN_DIR / "TL002_zero_grad.py").read_bytes()
    expected = (GOLDEN_DIR / "TL002_zero_grad.py.unsafe-fixed").read_bytes()
    path = tmp_path / "loop.py"
    path.write_bytes(source.replace(b"\n", b"\r\n"))
    torchlint("--fix", "--unsafe-fixes", "--select", "TL002", str(path))
    assert path.read_bytes() == expected.replace(b"\n", b"\r\n")


def test_permissions_are_kept(tmp_path) -> None:
    path = tmp_path / "tool.py"
    path.write_text(BAD)
    path.chmod(0o751)
    assert torchlint("--fix", str(path)).returncode == 0
    assert path.read_text() == FIXED
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["tool.py"]  # no temporary file left


def test_symlink_is_followed_and_kept(tmp_path) -> None:
    target = tmp_path / "real.py"
    target.write_text(BAD)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    assert torchlint("--fix", str(link)).returncode == 0
    assert link.is_symlink() and target.read_text() == FIXED


def test_read_only_file_is_left_untouched(tmp_path) -> None:
    path = tmp_path / "ro.py"
    path.write_text(BAD)
    path.chmod(0o444)
    other = tmp_path / "rw.py"
    other.write_text(BAD)
    result = torchlint("--fix", str(tmp_path))
    assert path.read_text() == BAD
    assert other.read_text() == FIXED
    assert result.returncode == 1
    assert "TL906" in result.stdout and "read-only" in result.stdout
    assert f"{path}:4:30: TL004" in result.stdout  # the finding stays reported


def test_file_changed_on_disk_is_not_overwritten(tmp_path, monkeypatch) -> None:
    from torchlint.cli import main

    work = tmp_path / "src"
    work.mkdir()
    path = work / "race.py"
    path.write_text(BAD)
    edited = BAD + "# the user saved meanwhile\n"
    monkeypatch.setattr(atomic, "before_compare", lambda target: Path(target).write_text(edited))
    report = tmp_path / "report.txt"
    code = main(["--fix", "--no-cache", "-o", str(report), str(path)])
    out = report.read_text()
    assert path.read_text() == edited
    assert code == 1
    assert "changed on disk" in out and f"{path}:4:30: TL004" in out
    assert [p.name for p in work.iterdir()] == ["race.py"]


def test_write_atomic_directly(tmp_path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"old")
    with pytest.raises(atomic.ConcurrentChange):
        atomic.write_atomic(str(path), b"new", expected=b"something else")
    assert path.read_bytes() == b"old"
    atomic.write_atomic(str(path), b"new", expected=b"old")
    assert path.read_bytes() == b"new"


# --- the command line ------------------------------------------------------------------------

@pytest.mark.slow  # every fixture through the CLI, end to end (CI and --runslow run it)
def test_fix_on_fixtures_fixes_exactly_the_safe_findings_then_unsafe_then_nothing(tmp_path) -> None:
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy)
    before = json.loads(torchlint("--output-format", "json", str(copy)).stdout)
    safe = sum(1 for f in before if f["fix"] and f["fix"]["applicability"] == "safe")
    assert safe > 0

    result = torchlint("--fix", "--output-format", "json", str(copy))
    after = json.loads(result.stdout)
    assert result.returncode == 1
    assert not any(f["fix"] and f["fix"]["applicability"] == "safe" for f in after)
    assert not any(f["code"].startswith("TL9") for f in after), [f for f in after if f["code"].startswith("TL9")]
    # The non-fixable and unsafe findings are all still there (the safe fixes touch nothing else).

    def key(items):
        return sorted((f["filename"], f["code"]) for f in items
                      if not (f["fix"] and f["fix"]["applicability"] == "safe"))
    # A safe fix of one rule can remove another's cause in the same file: TL003's `.detach()` of the
    # appended loss also leaves TL130's list without graphs. Those may go; nothing else may.
    fixed_files = {f["filename"]: {g["code"] for g in before if g["filename"] == f["filename"] and g["fix"]
                                   and g["fix"]["applicability"] == "safe"} for f in before}
    resolved_by = {"TL130": "TL003"}
    gone = [k for k in key(before) if k not in key(after)]
    assert all(resolved_by.get(code) in fixed_files.get(name, ()) for name, code in gone), gone
    assert [k for k in key(after) if k not in key(before)] == []

    result = torchlint("--fix", "--unsafe-fixes", "--output-format", "json", str(copy))
    assert result.returncode == 1
    unsafe = json.loads(result.stdout)
    assert not any(f["fix"] for f in unsafe)
    assert not any(f["code"].startswith("TL9") for f in unsafe)

    hashes = tree_hashes(copy)
    second = torchlint("--fix", "--unsafe-fixes", "--show-fixes", str(copy))
    assert tree_hashes(copy) == hashes
    assert second.stdout.count("\n") >= 2, (second.returncode, second.stderr[-3000:])
    assert "fixed" not in second.stdout.split("\n")[-2]
    for path in copy.rglob("*.py"):
        assert parses(path.read_text(encoding="utf-8")), path


def test_summary_show_fixes_and_exit_codes(tmp_path) -> None:
    path = tmp_path / "a.py"
    path.write_text(BAD + UNSAFE_ONLY)
    result = torchlint("--fix", "--show-fixes", str(path))
    assert result.returncode == 1
    assert "Found 2 findings (1 fixed, 1 remaining: 1 " in result.stdout
    assert f"Fixed 1 finding:\n- {path}:\n    1 × TL004 (view-after-transpose)\n" in result.stdout
    assert "TL108" in result.stdout and "TL004" not in result.stdout.split("Fixed")[0]

    path.write_text(BAD)
    result = torchlint("--fix", str(path))
    assert result.returncode == 0 and "Found 1 finding (1 fixed, 0 remaining)." in result.stdout
    path.write_text(BAD)
    assert torchlint("--fix", "--exit-non-zero-on-fix", str(path)).returncode == 1

    for output_format in ("full", "grouped"):
        path.write_text(BAD + UNSAFE_ONLY)
        result = torchlint("--fix", "--output-format", output_format, str(path))
        assert "Found 2 findings (1 fixed, 1 remaining: 1 " in result.stdout, output_format
    path.write_text(BAD)
    result = torchlint("--fix", "--output-format", "json", "--show-fixes", str(path))
    assert json.loads(result.stdout) == [] and "Fixed 1 finding:" in result.stderr
    assert torchlint("--fix", "--exit-non-zero-on-fix", str(path)).returncode == 0  # nothing left to fix


def test_diff_writes_nothing(tmp_path) -> None:
    path = tmp_path / "a.py"
    path.write_text(BAD)
    result = torchlint("--diff", str(path))
    assert result.returncode == 1
    assert path.read_text() == BAD
    assert "-    return x.transpose(0, 1).view(-1)\n+    return x.transpose(0, 1).contiguous().view(-1)\n" in result.stdout
    assert result.stdout.startswith(f"--- {path}\n+++ {path}\n")
    assert "Would fix 1 finding" in result.stderr
    path.write_text(FIXED)
    clean = torchlint("--diff", str(path))
    assert clean.returncode == 0 and clean.stdout == ""


@pytest.mark.slow  # every fixture through the CLI, end to end (CI and --runslow run it)
def test_diff_on_fixtures_writes_nothing(tmp_path) -> None:
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy)
    hashes = tree_hashes(copy)
    result = torchlint("--diff", "--unsafe-fixes", str(copy))
    assert result.returncode == 1 and result.stdout.count("+++ ") >= len(GOLDEN)
    assert tree_hashes(copy) == hashes


def test_stdin_fix_writes_fixed_source_to_stdout() -> None:
    result = torchlint("--fix", "-", "--stdin-filename", "m/attn.py", stdin=BAD)
    assert result.stdout == FIXED
    assert result.returncode == 0
    assert "1 fixed" in result.stderr
    crlf = BAD.replace("\n", "\r\n").encode()
    raw = torchlint("--fix", "-", stdin=crlf, text=False)
    assert raw.stdout == FIXED.replace("\n", "\r\n").encode()
    remaining = torchlint("--fix", "-", stdin=UNSAFE_ONLY)
    assert remaining.stdout == UNSAFE_ONLY and remaining.returncode == 1 and "TL108" in remaining.stderr
    diff = torchlint("--diff", "-", stdin=BAD)
    assert diff.returncode == 1 and "+    return x.transpose(0, 1).contiguous().view(-1)" in diff.stdout


def test_undecodable_file_gets_a_diagnostic_and_others_are_fixed(tmp_path) -> None:
    (tmp_path / "bad_bytes.py").write_bytes(b"x = '\xff'\n")
    (tmp_path / "syntax.py").write_text("y = x.view(-1)\ndef (:\n")
    good = tmp_path / "good.py"
    good.write_text(BAD)
    result = torchlint("--fix", str(tmp_path))
    assert good.read_text() == FIXED
    assert "TL902" in result.stdout and "TL901" in result.stdout
    assert (tmp_path / "bad_bytes.py").read_bytes() == b"x = '\xff'\n"
    assert result.returncode == 1


# --- notebooks -------------------------------------------------------------------------------

def _notebook(cells, indent=1) -> bytes:
    notebook = {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}, "zeta": 1, "alpha": "ü"},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return (json.dumps(notebook, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")


def _code(source, outputs=()):
    return {"cell_type": "code", "execution_count": 3, "id": "c1", "metadata": {"tags": ["x"]},
            "outputs": list(outputs), "source": source}


def test_notebook_fix_keeps_outputs_metadata_and_layout(tmp_path) -> None:
    output = {"output_type": "stream", "name": "stdout", "text": ["ok\n"]}
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Title ü"]},
        _code(["%matplotlib inline\n", "import torch\n", "y = x.transpose(0, 1).view(-1)\n", "!ls"], [output]),
        _code("z = x.t().view(-1)"),
    ]
    data = _notebook(cells)
    assert dump_notebook(json.loads(data), data) == data  # re-serialising alone changes nothing
    path = tmp_path / "nb.ipynb"
    path.write_bytes(data)
    result = torchlint("--fix", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    new = path.read_bytes()
    fixed_cells = [dict(c) for c in cells]
    fixed_cells[1] = _code(["%matplotlib inline\n", "import torch\n",
                            "y = x.transpose(0, 1).contiguous().view(-1)\n", "!ls"], [output])
    fixed_cells[2] = _code("z = x.t().contiguous().view(-1)")
    assert new == _notebook(fixed_cells)
    assert torchlint("--fix", str(path)).returncode == 0 and path.read_bytes() == new


def test_notebook_indent_two_and_diff(tmp_path) -> None:
    data = _notebook([_code(["y = x.transpose(0, 1).view(-1)\n"])], indent=2)
    path = tmp_path / "nb.ipynb"
    path.write_bytes(data)
    diff = torchlint("--diff", str(path))
    assert diff.returncode == 1 and f"--- {path}:cell 1" in diff.stdout and path.read_bytes() == data
    torchlint("--fix", str(path))
    assert path.read_bytes() == _notebook([_code(["y = x.transpose(0, 1).contiguous().view(-1)\n"])], indent=2)


def test_notebook_magic_lines_are_never_edited() -> None:
    from torchlint.fixer import apply_fixes as apply

    edit = _finding("TL004", [("X", (1, 1), (1, 3))])
    assert apply("%time y\nz\n", [edit], protected=[(0, 8)])[0] == "%time y\nz\n"


# --- interrupting ----------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX signals")
def test_sigint_leaves_every_file_old_or_new(tmp_path) -> None:
    source = (GOLDEN_DIR / "TL004_view.py").read_bytes()
    fixed = (GOLDEN_DIR / "TL004_view.py.fixed").read_bytes()
    count = 400
    for index in range(count):
        (tmp_path / f"m{index:04d}.py").write_bytes(source)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "torchlint", "--no-cache", "--fix", "--select", "TL004", str(tmp_path)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    files = sorted(tmp_path.glob("m*.py"))
    while time.monotonic() < deadline and process.poll() is None:
        if files[20].read_bytes() == fixed:  # well into the run
            break
        time.sleep(0.005)
    interrupted = process.poll() is None
    if interrupted:
        process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    states = [p.read_bytes() for p in files]
    assert all(state in (source, fixed) for state in states)
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in files]  # no temporary files
    if interrupted:
        assert process.returncode == 130, process.stderr.read()
        assert states.count(fixed) < count, "the run finished before the interrupt"


def test_notebook_with_a_broken_fix_is_left_unchanged(tmp_path, monkeypatch) -> None:
    import torchlint.fixer as fixer

    cells = [_code(["y = x.transpose(0, 1).view(-1)\n"]), _code(["z = x.t().view(-1)\n"])]
    data = _notebook(cells)
    real = fixer.apply_fixes
    calls = []

    def breaking(text, *args, **kwargs):
        new, counts = real(text, *args, **kwargs)
        calls.append(text)
        return (new + "(\n" if "z = " in text else new), counts

    monkeypatch.setattr(fixer, "apply_fixes", breaking)
    fixed = fix_data("nb.ipynb", data, select_rules(["TL004"]), False)
    assert fixed.new == data and not fixed.fixed
    # the cells are fixed as one module, so the broken fix leaves the whole notebook unchanged
    assert [(f.code, f.cell) for f in fixed.result.findings] == [("TL004", 1), ("TL004", 2), ("TL903", None)]

    # a cell that is not complete on its own is left out of the module (its own TL901): the other
    # cells are still fixed as one module, and the broken fix still leaves the notebook unchanged
    cells.append(_code(["for i in range(3):\n"]))
    fixed = fix_data("nb.ipynb", _notebook(cells), select_rules(["TL004"]), False)
    assert fixed.new == _notebook(cells) and not fixed.fixed
    assert [(f.code, f.cell) for f in fixed.result.findings] == [
        ("TL004", 1), ("TL004", 2), ("TL903", None), ("TL901", 3)]


def test_diff_of_a_file_without_final_newline() -> None:
    from torchlint.fixer import FileFix, unified_diff

    fix = FileFix("a.py", b"", b"", None, texts=[("a.py", "x = 1\ny.view", "x = 1\ny.contiguous().view")])
    assert unified_diff([fix]).endswith(
        "-y.view\n\\ No newline at end of file\n+y.contiguous().view\n\\ No newline at end of file\n"
    )


@pytest.mark.slow  # every fixture through the CLI, end to end (CI and --runslow run it)
def test_fix_with_workers_and_cache_equals_fix_in_one_process(tmp_path) -> None:
    # Fix mode lints with the lint path's workers and cache first and fixes only the files
    # that have a fix to apply; the outcome must not depend on that.
    one, many = tmp_path / "one", tmp_path / "many"
    shutil.copytree(FIXTURES, one)
    shutil.copytree(FIXTURES, many)
    serial = torchlint("--fix", "--unsafe-fixes", "--jobs", "1", "--output-format", "json", str(one), cwd=one)

    def cached(*args: str):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        command = [sys.executable, "-m", "torchlint", "--jobs", "2", "--cache-dir", str(tmp_path / "cache"), *args]
        return subprocess.run(command, cwd=many, capture_output=True, text=True, env=env, timeout=300)

    assert cached("--output-format", "json", str(many)).returncode == 1  # fills the cache
    parallel = cached("--fix", "--unsafe-fixes", "--output-format", "json", str(many))
    assert serial.returncode == parallel.returncode == 1
    strip = lambda out, root: sorted(  # noqa: E731
        (os.path.relpath(f["filename"], root), f["code"], f["location"]["row"]) for f in json.loads(out))
    assert strip(serial.stdout, one) == strip(parallel.stdout, many)
    assert {p.relative_to(one): p.read_bytes() for p in one.rglob("*") if p.is_file()} == \
        {p.relative_to(many): p.read_bytes() for p in many.rglob("*") if p.is_file()}
