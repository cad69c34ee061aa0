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
        found[_name(script)]["_html"] = str(out / f"{_name(script)}.html")
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


def test_escape_codes_are_cleaned_from_torch_messages(reports):
    report = reports["ansi_error"]
    assert report["exit_code_seen"] == 2
    text = json.dumps(report, ensure_ascii=False)
    assert "\x1b" not in text and "\\u001b" not in text
    assert "compilation failed: see log for details" in report["outcome"]["traceback"]


# -- issue 44: no false all-clear, one bug one finding ---------------------------------------------------

def _findings(report: dict, code: str) -> list:
    return [f for f in report["findings"] if f["code"] == code]


def test_eval_in_training_mode_with_autograd_on_is_confirmed_with_measured_evidence(reports):
    report = reports["tl107_grad_bad"]
    (tl107,) = _findings(report, "TL107")
    assert tl107["status"] == "CONFIRMED" and tl107["source"] == "static"
    evidence = tl107["evidence"]
    assert "BatchNorm running statistics changed during 7 of these calls" in evidence
    assert "BatchNorm1d `1` by " in evidence and " %" in evidence and "num_batches_tracked +7" in evidence
    assert "Dropout `3` (p=0.3) active: two calls on the same batch differ" in evidence
    assert tl107["count"] == 8  # 4 batches in each of 2 validations
    (tl106,) = _findings(report, "TL106")  # the same calls' graphs, which no backward used
    assert tl106["status"] == "CONFIRMED" and "8 calls in training mode" in tl106["evidence"]
    assert len(report["findings"]) == 2


def test_eval_in_training_mode_under_no_grad_has_the_dropout_evidence(reports):
    (tl107,) = _findings(reports["tl107_bad"], "TL107")
    assert tl107["status"] == "CONFIRMED" and tl107["count"] == 3
    assert "torch.no_grad()" in tl107["evidence"] and "two calls on the same batch differ" in tl107["evidence"]


def test_losses_appended_after_backward_are_one_finding_measured_twice(reports):
    report = reports["tl003_after_backward_bad"]
    (finding,) = report["findings"]
    assert finding["status"] == "CONFIRMED" and finding["location"]["row"] == 21
    evidence = finding["evidence"]
    assert "in `losses` (kept by line 21) at step 3" in evidence
    assert "at the end of the run (after step 16)" in evidence and "step 17" not in evidence
    assert "autograd nodes" in evidence and "nodes and +0.0 KiB of saved tensors per step" in evidence
    assert "only the graphs' nodes grow" in evidence
    assert finding["severity"] == "note"  # after backward() only the nodes are kept
    assert finding["first_step"] == 3 and finding["count"] == 1


def test_running_sum_and_its_average_are_one_finding(reports):
    report = reports["tl003_sum_avg_bad"]
    (finding,) = report["findings"]
    assert finding["status"] == "CONFIRMED" and finding["location"]["row"] == 17
    assert "`total` (added to at line 17)" in finding["evidence"] and "avg" not in finding["evidence"]
    assert "at the end of the run (after step 8)" in finding["evidence"] and "per step" in finding["evidence"]
    assert finding["count"] == 1 and finding["severity"] == "note"


def test_shape_error_confirms_the_static_finding_at_the_layer(reports):
    report = reports["tl301_layer_bad"]
    (finding,) = report["findings"]
    assert finding["status"] == "CONFIRMED" and finding["location"]["row"] == 13 and finding["ended_run"]
    assert "the layer at fault: `classifier.1` (Linear), which got 4×294" in finding["evidence"]
    assert "features.0 4×3×16×16 → 4×6×14×14" in finding["evidence"]
    trace = report["shape_trace"]
    assert trace["complete"] and trace["at_fault"] == "classifier.1"
    assert [e["module"] for e in trace["entries"]] == \
        ["features", "features.0", "features.1", "features.2", "classifier.0", "classifier.1", "classifier", "Net"]
    fault = trace["entries"][5]
    assert fault["inputs"] == ["(4, 294)"] and ["weight", "(32, 216)"] in fault["parameters"] and fault["raised"]


def test_retained_saved_tensors_keep_the_warning_severity(reports):
    (finding,) = _findings(reports["tl003_bad"], "TL003")  # validation forwards no backward freed
    assert finding["severity"] == "warning" and "KiB of saved tensors per step" in finding["evidence"]


def test_bias_before_batchnorm_and_frozen_parameters_are_no_alarm(reports):
    report = reports["frozen_bias_bn_good"]
    health = report["gradient_health"]
    rows = {row["parameter"]: row for row in health["parameters"]}
    assert rows["conv.bias"]["feeds_batchnorm"] == "bn" and rows["fc.bias"]["feeds_batchnorm"] == "norm"
    assert rows["conv.bias"]["zero_by_construction"] == 5 and rows["conv.bias"]["vanishing"] == 0
    assert rows["head.bias"]["feeds_batchnorm"] is None
    assert all(row["grad_none"] == 0 for row in rows.values())
    assert not any(name.startswith("backbone.") for name in rows)
    assert health["frozen"] == ["backbone.0.bias", "backbone.0.weight"]
    assert any("bias=False" in note for note in health["notes"])
    assert any("frozen on purpose" in note for note in health["notes"])
    bias = {row["parameter"]: row for row in reports["tl107_grad_bad"]["gradient_health"]["parameters"]}["0.bias"]
    assert bias["vanishing"] == 0 and bias["zero_by_construction"] == 5
