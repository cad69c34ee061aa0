"""`torchlint run` on the scripts of fixtures/run/: each bad script gives its code at the marked
lines and nothing else, each good script gives nothing and exits 0, the static findings get the
status the script says, and the report has its gradient-health and memory sections.

All scripts run in ONE child process (`python -m torchlint.runtime._batch`), so torch is imported
once; each writes its json report, which the tests read.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from markers import read_markers
from torchlint.runtime._batch import directives

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "run"
# A script that does not even parse (TL204's `async=True`) is kept as .py.txt: the linter's own
# fixture tests expect every fixtures/**/*.py to parse. `python` runs it all the same.
SCRIPTS = sorted(list(FIXTURES.glob("*.py")) + list(FIXTURES.glob("*.py.txt")))


def _name(path: Path) -> str:
    return path.name.split(".")[0]


BAD = [p for p in SCRIPTS if _name(p).endswith("_bad")]
GOOD = [p for p in SCRIPTS if _name(p).endswith("_good")]
HARMFUL = ("CONFIRMED", "FOUND BY THE RUN")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("run-reports")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-m", "torchlint.runtime._batch", str(out)] + [str(p.relative_to(ROOT)) for p in SCRIPTS],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = {}
    for script in SCRIPTS:
        path = out / f"{_name(script)}.json"
        assert path.exists(), f"no report for {script.name}; stderr: {result.stderr[-2000:]}"
        found[_name(script)] = json.loads(path.read_text(encoding="utf-8"))
    return found


def _skip_for_device(script: Path, report: dict) -> None:
    cuda = report.get("environment", {}).get("cuda_available")
    wanted = directives(str(script)).get("cuda")
    if wanted == "absent" and cuda:
        pytest.skip("needs a machine without CUDA")
    if wanted == "present" and not cuda:
        pytest.skip("needs a CUDA device")


def _harmful(report: dict):
    return sorted((f["code"], f["location"]["row"]) for f in report["findings"] if f["status"] in HARMFUL)


@pytest.mark.parametrize("script", BAD, ids=[_name(p) for p in BAD])
def test_bad_script_reports_its_code_at_the_marked_lines(reports, script):
    report = reports[_name(script)]
    _skip_for_device(script, report)
    expected = sorted((m.code, m.row) for m in read_markers(script.read_text(encoding="utf-8")))
    assert expected, f"{script.name} marks no finding"
    assert _harmful(report) == expected, json.dumps(report["findings"], indent=1)
    wanted_exit = int(directives(str(script)).get("exit", 1))
    assert report["exit_code_seen"] == wanted_exit, report["outcome"]
    assert not report["internal_errors"], report["internal_errors"]
    for finding in report["findings"]:
        if finding["status"] in HARMFUL:
            assert finding["evidence"], finding


@pytest.mark.parametrize("script", GOOD, ids=[_name(p) for p in GOOD])
def test_good_script_reports_nothing_and_exits_0(reports, script):
    report = reports[_name(script)]
    _skip_for_device(script, report)
    assert _harmful(report) == [], json.dumps(report["findings"], indent=1)
    assert report["exit_code_seen"] == 0, report["outcome"]
    assert report["outcome"]["kind"] in ("finished", "stopped")
    assert not report["internal_errors"], report["internal_errors"]


def test_static_findings_of_registered_rules_are_confirmed_at_their_line(reports):
    """Where the static analyzer flags a marked line, the run confirms that very finding."""
    from torchlint.engine import lint_source

    checked = 0
    for script in BAD:
        report = reports[_name(script)]
        if directives(str(script)).get("cuda") == "absent" and report["environment"].get("cuda_available"):
            continue
        source = script.read_text(encoding="utf-8")
        flagged = {(f.code, f.start.row) for f in lint_source(source, str(script)) if not f.is_diagnostic}
        for marker in read_markers(source):
            if (marker.code, marker.row) not in flagged:
                continue
            statuses = [f["status"] for f in report["findings"]
                        if f["code"] == marker.code and f["location"]["row"] == marker.row and f["source"] == "static"]
            assert statuses == ["CONFIRMED"], (script.name, marker, report["findings"])
            checked += 1
    assert checked >= 15, checked  # most bad scripts have a static twin on this branch


@pytest.mark.parametrize("script", [p for p in SCRIPTS if "static" in directives(str(p))],
                         ids=_name)
def test_static_status(reports, script):
    report = reports[_name(script)]
    for item in directives(str(script))["static"].split(","):
        code, _, status = item.strip().partition(":")
        statuses = {f["status"] for f in report["findings"] if f["code"] == code}
        assert statuses == {status}, report["findings"]
    assert report["exit_code_seen"] == int(directives(str(script)).get("exit", 0))


def test_max_steps_stops_an_endless_loop_cleanly(reports):
    report = reports["long_loop_good"]
    assert report["outcome"]["kind"] == "stopped"
    assert report["outcome"]["optimizer_steps"] == 5
    assert "--max-steps 5" in report["outcome"]["reason"]
    assert report["exit_code_seen"] == 0


def test_sys_exit_0_is_a_normal_end(reports):
    report = reports["sys_exit_good"]
    assert report["outcome"]["kind"] == "finished" and report["exit_code_seen"] == 0


def test_unrelated_failure_exits_2_with_the_users_frames_only(reports):
    report = reports["own_error"]
    assert report["exit_code_seen"] == 2
    assert report["outcome"]["kind"] == "failed"
    traceback_text = report["outcome"]["traceback"]
    assert "own_error.py" in traceback_text and "FileNotFoundError: no config at missing.yaml" in traceback_text
    assert "runpy" not in traceback_text and "torchlint/runtime" not in traceback_text
    assert 'line 17, in <module>' in traceback_text and 'line 8, in load_config' in traceback_text


def test_known_rule_error_ends_the_run_as_a_finding_not_a_failure(reports):
    report = reports["tl004_bad"]
    assert report["outcome"]["kind"] == "failed" and report["exit_code_seen"] == 1
    (finding,) = [f for f in report["findings"] if f["status"] in HARMFUL]
    assert finding["ended_run"] and "strides" in finding["evidence"]


def test_gradient_health_table(reports):
    report = reports["health_report"]
    health = {row["parameter"]: row for row in report["gradient_health"]["parameters"]}
    assert report["gradient_health"]["steps"] == 4
    assert health["unused.weight"]["grad_none"] == 4 and health["unused.bias"]["grad_none"] == 4
    assert health["used.weight"]["nan_or_inf"] >= 1 and health["body.weight"]["nan_or_inf"] >= 1
    assert health["used.weight"]["grad_none"] == 0
    assert health["used.weight"]["norm_max"] is not None


def test_memory_per_step_and_growth_explained(reports):
    report = reports["tl003_bad"]
    samples = report["memory"]["samples"]
    assert [s["step"] for s in samples] == list(range(1, 13))
    assert samples[-1]["saved_bytes"] > samples[1]["saved_bytes"] > 0  # the first step comes before any validation
    assert report["memory"]["growth"] and "per step" in report["memory"]["growth"]
    assert any(item.startswith("TL003 at ") for item in report["memory"]["explained_by"])
    clean = reports["tl002_good"]["memory"]
    assert clean["samples"] and clean["growth"] is None


def test_tl002_evidence_names_parameters_and_the_gradient_sum(reports):
    (finding,) = [f for f in reports["tl002_bad"]["findings"] if f["code"] == "TL002"]
    assert "`0.weight`" in finding["evidence"] and "×" in finding["evidence"]
    assert finding["count"] >= 10 and finding["first_step"] == 2


def test_tl003_names_the_container(reports):
    (finding,) = [f for f in reports["tl003_bad"]["findings"] if f["code"] == "TL003"]
    assert "`val_losses`" in finding["evidence"] and "saved tensors" in finding["evidence"]
    (total,) = [f for f in reports["tl003_sum_bad"]["findings"] if f["code"] == "TL003"]
    assert "`total_loss`" in total["evidence"]


def test_device_errors_name_where_the_parameters_are(reports):
    split = reports["tl005_bad"]["findings"][0]
    assert "encoder" in split["evidence"] and "head" in split["evidence"]
    (attribute,) = [f for f in reports["tl102_bad"]["findings"] if f["code"] == "TL102"]
    assert "Masked.mask" in attribute["evidence"]


def test_cuda_path_reports_allocated_memory(reports):
    report = reports["cuda_memory_good"]
    if not report["environment"].get("cuda_available"):
        pytest.skip("needs a CUDA device")
    samples = report["memory"]["samples"]
    assert len(samples) == 8 and all(s["cuda_allocated"] for s in samples)
    assert report["exit_code_seen"] == 0
    for name in ("tl005_bad", "tl007_bad", "tl102_bad"):  # a real second device instead of meta
        assert report and reports[name]["exit_code_seen"] == 1, reports[name]["findings"]
