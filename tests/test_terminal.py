"""What a person at a terminal sees and a pipe does not, each behaviour run under a pseudo-terminal
(`pty`) and in a pipe: colour, the progress line, `-q`/`-qq`, the summary, `--statistics`,
`--list-rules`, wrapping, and the warning for an explicit path a default exclude skips."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n"
CLEAN = "import torch\n\ndef f(x):\n    return x.transpose(0, 1).reshape(-1)\n"
LONG = """\
import torch
from torch import nn

model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10), nn.Softmax(dim=1))
loss_fn = nn.CrossEntropyLoss()
loss = loss_fn(model(x), y)
"""
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "TORCHLINT_OUTPUT_FORMAT",
                        "TORCHLINT_PROGRESS_DELAY", "GITHUB_ACTIONS")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT))
    env.update(extra)
    return env


def _tty(columns: int):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return master, slave


def run(args, cwd, tty: bool, env=None, columns: int = 100, stderr_tty=None):
    """(exit status, stdout, stderr) of `torchlint ARGS`; stdout (and stderr, unless `stderr_tty`
    says otherwise) a pseudo-terminal of `columns` columns when `tty`, else pipes."""
    stderr_tty = tty if stderr_tty is None else stderr_tty
    masters, slaves = {}, []
    streams = {}
    for name, wanted in (("stdout", tty), ("stderr", stderr_tty)):
        if wanted:
            master, slave = _tty(columns)
            masters[name] = master
            slaves.append(slave)
            streams[name] = slave
        else:
            streams[name] = subprocess.PIPE
    process = subprocess.Popen([sys.executable, "-m", "torchlint", "--no-cache", *args], cwd=cwd,
                               stdin=subprocess.DEVNULL, env=_env(env or {}), **streams)
    for slave in slaves:
        os.close(slave)
    fds = dict(masters)
    if process.stdout is not None:
        fds["stdout"] = process.stdout.fileno()
    if process.stderr is not None:
        fds["stderr"] = process.stderr.fileno()
    chunks = {name: b"" for name in fds}
    open_fds = dict(fds)
    while open_fds:
        ready, _, _ = select.select(list(open_fds.values()), [], [], 120)
        if not ready:
            process.kill()
            pytest.fail("torchlint did not finish")
        for name, fd in list(open_fds.items()):
            if fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's other side closed
                    data = b""
                if data:
                    chunks[name] += data
                else:
                    del open_fds[name]
    status = process.wait(timeout=120)
    for master in masters.values():
        os.close(master)
    out = chunks["stdout"].decode().replace("\r\n", "\n")
    err = chunks["stderr"].decode().replace("\r\n", "\n")
    return status, out, err


@pytest.fixture
def project(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    (tmp_path / "long.py").write_text(LONG)
    return tmp_path


BOTH = pytest.mark.parametrize("tty", [True, False], ids=["pty", "pipe"])


# -- colour -----------------------------------------------------------------------------------

def test_colour_on_a_terminal_none_in_a_pipe(project):
    status, out, _ = run(["bad.py"], project, tty=True)
    assert status == 1 and ANSI.search(out), out
    assert ANSI.sub("", out).startswith("bad.py:4:30: TL004 [*] warning:")
    status, out, _ = run(["bad.py"], project, tty=False)
    assert status == 1 and not ANSI.search(out) and out.startswith("bad.py:4:30: TL004 [*] warning:")


@pytest.mark.parametrize("args, env, coloured", [
    (["--color", "never"], {}, False),
    ([], {"NO_COLOR": "1"}, False),
    ([], {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),  # NO_COLOR wins, as in pytest
    ([], {"NO_COLOR": ""}, True),  # empty: not set
    ([], {"TERM": "dumb"}, False),
    (["--output-format", "json"], {}, False),
    (["--output-format", "sarif"], {"FORCE_COLOR": "1"}, False),
    (["--output-format", "github"], {}, False),
    (["--output-format", "full"], {}, True),
    (["--output-format", "grouped"], {}, True),
])
def test_colour_switches_on_a_terminal(project, args, env, coloured):
    _, out, _ = run([*args, "bad.py"], project, tty=True, env=env)
    assert bool(ANSI.search(out)) is coloured, out


@pytest.mark.parametrize("args, env, coloured", [
    (["--color", "always"], {}, True),
    ([], {"FORCE_COLOR": "1"}, True),
    (["--color", "auto"], {}, False),
    (["--color", "always", "--output-format", "json"], {}, False),
])
def test_colour_switches_in_a_pipe(project, args, env, coloured):
    _, out, _ = run([*args, "bad.py"], project, tty=False, env=env)
    assert bool(ANSI.search(out)) is coloured, out


def test_no_colour_in_an_output_file(project):
    status, out, _ = run(["-o", "report.txt", "bad.py"], project, tty=True)
    assert status == 1 and out == ""
    text = (project / "report.txt").read_text()
    assert "TL004" in text and not ANSI.search(text)


# -- progress ---------------------------------------------------------------------------------

def _many(tmp_path, count=12):
    for index in range(count):
        (tmp_path / f"m{index:02}.py").write_text(CLEAN if index % 2 else BAD)
    return tmp_path


def test_progress_on_a_terminal_then_cleared(tmp_path):
    project = _many(tmp_path)
    status, out, err = run(["-j", "1", "."], project, tty=True, env={"TORCHLINT_PROGRESS_DELAY": "0"})
    assert status == 1
    assert re.search(r"\r\d+/12 files", err) and "\r12/12 files" in err, repr(err)
    assert err.endswith("\r\x1b[K"), repr(err)  # cleared before the report
    assert "files" not in out


def test_progress_with_workers(tmp_path):
    project = _many(tmp_path, 16)
    _, _, err = run(["-j", "2", "."], project, tty=True, env={"TORCHLINT_PROGRESS_DELAY": "0"})
    assert "\r16/16 files" in err, repr(err)


@pytest.mark.parametrize("args, env, stderr_tty", [
    ([], {}, False),  # a pipe
    ([], {"CI": "true"}, True),  # a CI log
    (["--output-format", "json"], {}, True),  # a machine format
    (["--output-format", "sarif"], {}, True),
    (["-q"], {}, True),
])
def test_no_progress(tmp_path, args, env, stderr_tty):
    project = _many(tmp_path)
    _, _, err = run([*args, "-j", "1", "."], project, tty=True, stderr_tty=stderr_tty,
                    env={"TORCHLINT_PROGRESS_DELAY": "0", **env})
    assert "files" not in err and "\r" not in err, repr(err)


def test_no_progress_for_a_quick_run(tmp_path):
    """The default: only a run that has taken about a second shows it."""
    project = _many(tmp_path, 3)
    _, _, err = run(["-j", "1", "."], project, tty=True)
    assert "files" not in err, repr(err)


# -- -q, -qq ------------------------------------------------------------------------------------

@BOTH
def test_quiet_prints_the_findings_only(project, tty):
    status, out, err = run(["-q", "bad.py", "long.py"], project, tty=tty, env={"NO_COLOR": "1"})
    assert status == 1
    lines = out.splitlines()
    assert lines and all(re.match(r"(bad|long)\.py:\d+:\d+: TL\d{3} ", line) for line in lines), out
    assert "Found" not in out and "fixable" not in out and err == ""


@BOTH
def test_quiet_quiet_prints_nothing(project, tty):
    (project / "binary.py").write_bytes(b"\x00\x01")
    status, out, err = run(["-qq", "bad.py", "binary.py", "missing-dir-is-not-here"], project, tty=tty)
    assert status == 1 and out == "", out
    status, out, err = run(["-qq", "--output-format", "json", "bad.py"], project, tty=tty)
    assert status == 1 and out == "" and err == ""
    status, out, err = run(["-qq", "clean.py"], project, tty=tty)
    assert status == 0 and out == "" and err == ""


@BOTH
def test_quiet_fix_reports_what_remains_only(project, tty):
    status, out, _ = run(["-q", "--fix", "bad.py", "long.py"], project, tty=tty, env={"NO_COLOR": "1"})
    assert "Found" not in out and "fixed" not in out
    assert ".contiguous().view(-1)" in (project / "bad.py").read_text()


# -- summary ------------------------------------------------------------------------------------

@BOTH
def test_all_checks_passed_only_when_every_file_was_checked_and_clean(project, tty):
    status, out, _ = run(["clean.py"], project, tty=tty, env={"NO_COLOR": "1"})
    assert status == 0 and out == "All checks passed!\n"
    (project / "latin.py").write_bytes(b"x = 1\ny = 'caf\xe9'\n")
    status, out, _ = run(["clean.py", "latin.py"], project, tty=tty, env={"NO_COLOR": "1"})
    assert status == 1 and "All checks passed!" not in out
    assert "latin.py:2:9: TL902 error:" in out
    assert "Found 1 finding: 1 error.\n" in out and "1 file could not be fully checked (TL9xx)." in out
    (project / "empty").mkdir()
    status, out, err = run(["empty"], project, tty=tty, env={"NO_COLOR": "1"})
    assert status == 0 and "All checks passed!" not in out and "No Python files found" in err


@BOTH
def test_summary_counts_diagnostics(project, tty):
    (project / "broken.py").write_text("def f(:\n")
    status, out, _ = run(["bad.py", "broken.py"], project, tty=tty, env={"NO_COLOR": "1"})
    assert status == 1
    assert "Found 2 findings: 1 error, 1 warning." in out, out
    assert "[*] 1 fixable with the --fix option." in out


# -- --statistics -------------------------------------------------------------------------------

@BOTH
def test_statistics_is_a_table_only_sorted_by_count(tmp_path, tty):
    (tmp_path / "a.py").write_text(BAD + "\ndef g(y):\n    return y.permute(1, 0).view(-1)\n")
    (tmp_path / "b.py").write_text(LONG)
    status, out, _ = run(["--statistics", "a.py", "b.py"], tmp_path, tty=tty, env={"NO_COLOR": "1"})
    assert status == 1
    assert out.splitlines() == ["2\tTL004\t[*] view-after-transpose", "1\tTL108\t    softmax-before-cross-entropy"], out
    _, out, _ = run(["--statistics", "--output-format", "full", "a.py"], tmp_path, tty=tty, env={"NO_COLOR": "1"})
    assert out == "2\tTL004\t[*] view-after-transpose\n"


# -- --list-rules -------------------------------------------------------------------------------

@BOTH
def test_list_rules_header_severity_and_legend(tmp_path, tty):
    from torchlint.rules import all_rules

    status, out, _ = run(["--list-rules"], tmp_path, tty=tty)
    assert status == 0
    lines = out.splitlines()
    assert re.match(r"code\s+fix\s+severity\s+name\s+summary$", lines[0]), lines[0]
    rows = [line for line in lines if re.match(r"TL\d{3} ", line)]
    assert len(rows) == len(all_rules())
    tl004 = next(row for row in rows if row.startswith("TL004"))
    assert re.match(r"TL004\s+\[\*\] warning–error\s+view-after-transpose\s+`\.view\(\)`", tl004), tl004
    tl005 = next(row for row in rows if row.startswith("TL005"))
    assert re.match(r"TL005\s{5}\s+error\s+partial-device-move", tl005), tl005
    assert any(line.startswith("[*]") or "[*]:" in line for line in lines[-3:]), lines[-3:]
    assert "severity:" in out.split("\n\n")[-1]


def test_severity_range():
    from torchlint.finding import Severity
    from torchlint.rules import get_rule

    assert get_rule("TL002").severity_range() == (Severity.ERROR, Severity.ERROR)
    assert get_rule("TL120").severity_range() == (Severity.NOTE, Severity.ERROR)
    assert get_rule("TL120").severity_range_text() == "note–error"


# -- wrapping -----------------------------------------------------------------------------------

@pytest.mark.parametrize("format_name", ["full", "grouped"])
def test_long_messages_wrap_on_a_terminal(project, format_name):
    status, out, _ = run(["--output-format", format_name, "long.py"], project, tty=True, columns=70)
    assert status == 1
    plain = ANSI.sub("", out)
    assert all(len(line) <= 70 for line in plain.splitlines()), plain
    message_lines = [line for line in plain.splitlines() if line.startswith("      ") or line.startswith("    ")]
    assert message_lines, plain
    assert "which expects logits" in " ".join(plain.split())


@pytest.mark.parametrize("format_name", ["full", "grouped"])
def test_no_wrapping_in_a_pipe(project, format_name):
    status, out, _ = run(["--output-format", format_name, "long.py"], project, tty=False, env={"COLUMNS": "70"})
    line = next(line for line in out.splitlines() if "TL108" in line)
    assert "where probabilities are needed" in line and len(line) > 70


@BOTH
def test_concise_stays_one_line_per_finding(project, tty):
    _, out, _ = run(["long.py"], project, tty=tty, columns=70, env={"NO_COLOR": "1"})
    (line,) = [line for line in out.splitlines() if "TL108" in line]
    assert line.startswith("long.py:6:16: TL108 error:") and line.endswith("where probabilities are needed")


# -- excluded explicit paths ----------------------------------------------------------------------

@BOTH
def test_explicit_path_skipped_by_a_default_exclude_warns(tmp_path, tty):
    packages = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "pkg"
    packages.mkdir(parents=True)
    (packages / "mod.py").write_text(BAD)
    status, out, err = run([str(packages.relative_to(tmp_path))], tmp_path, tty=tty, env={"NO_COLOR": "1"})
    assert status == 0 and "All checks passed!" not in out
    assert "warning: .venv/lib/python3.11/site-packages/pkg is skipped: it matches the default exclude '.venv'" in err
    assert "--no-default-excludes lints it" in err and "No Python files found" not in err
    status, out, _ = run(["--no-default-excludes", str(packages.relative_to(tmp_path))], tmp_path, tty=tty,
                         env={"NO_COLOR": "1"})
    assert status == 1 and "TL004" in out
    status, out, err = run(["-q", ".venv"], tmp_path, tty=tty)
    assert err == ""


def test_user_exclude_warning_names_the_setting(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["generated"]\n')
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "m.py").write_text(BAD)
    _, _, err = run(["generated"], tmp_path, tty=False)
    assert "warning: generated is skipped: it matches the exclude pattern 'generated'" in err
    assert "`exclude`/`extend-exclude`" in err
