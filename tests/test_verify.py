"""The runtime verifier: every case CONFIRMED on CPU, claims REFUTED, report shape, crashes and
hangs reported as ERROR, and the message when torch is missing."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.verify import NO_TORCH_MESSAGE, select_cases
from torchlint.verify.case import Case
from torchlint.verify.cases import all_cases, case_modules
from torchlint.verify.claims import all_claims
from torchlint.verify.probes import PROBES

ROOT = Path(__file__).resolve().parent.parent
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
CPU_BUDGET_S = 15.0


def _lint_source_exists() -> bool:
    try:
        engine = importlib.import_module("torchlint.engine")
    except ModuleNotFoundError:
        return False
    return hasattr(engine, "lint_source")


def _verify(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "torchlint.verify", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def cpu_report():
    """The whole CPU verification, rule cases and claims, through the real command line."""
    result = _verify("--claims", "--device", "cpu", "--output-format", "json")
    assert result.stdout, result.stderr
    report = json.loads(result.stdout)
    report["_returncode"] = result.returncode
    return report


# ------------------------------------------------------------------------------------------
# Registry (no torch needed)


def test_every_registered_rule_has_a_case():
    try:
        from torchlint.rules import all_rules
    except ImportError:
        pytest.skip("torchlint.rules.all_rules does not exist yet")
    case_rules = {case.rule for case in all_cases()}
    missing = [rule.code for rule in all_rules() if rule.code not in case_rules]
    assert not missing, f"rules without a confirmation case: {missing}"
    modules = set(case_modules())
    for rule in all_rules():
        if getattr(rule, "confirmation_module", ""):
            assert rule.confirmation_module in modules, (rule.code, rule.confirmation_module)


def test_mission_rules_have_cases():
    assert {f"TL00{i}" for i in range(1, 7)} <= {case.rule for case in all_cases()}


@pytest.mark.parametrize("case", all_cases() + all_claims(), ids=lambda c: f"{c.rule}-{c.title[:30]}")
def test_case_is_well_formed(case: Case):
    assert case.probe in PROBES
    assert set(case.devices) <= {"cpu", "cuda"} and case.devices
    assert "import torch" in case.bad and "import torch" in case.good
    if case.probe != "syntax_error":  # its bad snippet is one Python refuses (TL204)
        compile(case.bad, "<bad>", "exec")
    compile(case.good, "<good>", "exec")
    if case.is_claim:
        assert case.bad_line == 0
    else:
        assert 1 <= case.bad_line <= len(case.bad.splitlines())
        assert case.bad != case.good


def test_case_modules_hold_only_their_rule():
    for name, cases in case_modules().items():
        assert cases, name
        assert all(case.rule == name[:5].upper() for case in cases), name


def test_select_cases():
    assert {c.rule for c in select_cases(["tl00"])} >= {"TL001", "TL006"}
    assert all(not c.is_claim for c in select_cases([]))
    assert [c.rule for c in select_cases(["CLAIM-003"])] == ["CLAIM-003"]
    assert any(c.is_claim for c in select_cases([], claims=True))
    with pytest.raises(ValueError, match="TL999"):
        select_cases(["TL999"])
    with pytest.raises(ValueError):
        select_cases(["E501"])


def test_parent_never_imports_torch():
    code = (
        "import sys\n"
        "from torchlint.verify import select_cases\n"
        "from torchlint.verify import runner, report, probes, static\n"
        "from torchlint.verify.static import check_case, load_linter\n"
        "lint, _ = load_linter()\n"
        "[check_case(c, lint) for c in select_cases(claims=True)]\n"
        "runner.torch_build_has_cuda()\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_no_torch_message():
    # -S: no site-packages, so torch cannot be found; the checkout comes from sys.path.
    code = (
        "import sys, importlib.util\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "assert importlib.util.find_spec('torch') is None\n"
        "from torchlint.verify import main\n"
        "sys.exit(main(['--device', 'cpu']))\n"
    )
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == NO_TORCH_MESSAGE
    assert result.stdout == ""


def _finding(code: str, row: int):
    from types import SimpleNamespace

    return SimpleNamespace(code=code, start=SimpleNamespace(row=row, column=1))


def test_static_cross_check_decides_the_verdict():
    from torchlint.verify.runner import decide
    from torchlint.verify.static import check_case

    case = next(c for c in all_cases() if c.rule == "TL004")

    def good_lint(source, path, select):
        return [_finding("TL004", case.bad_line)] if source == case.bad else []

    def wrong_line(source, path, select):
        return [_finding("TL004", case.bad_line + 1)]

    def crashing(source, path, select):
        raise RecursionError("deep")

    def row(static_result, bad_harm=True, good_harm=False):
        r = {"kind": "rule", "bad": {"harm": bad_harm, "evidence": "e"},
             "good": {"harm": good_harm, "evidence": "e"}, "static": static_result,
             "verdict": None, "reason": None}
        decide(r)
        return r

    ok = check_case(case, good_lint)
    assert ok["status"] == "ok" and row(ok)["verdict"] == "CONFIRMED"
    mismatch = check_case(case, wrong_line)
    assert mismatch["status"] == "mismatch"
    assert f"not reported at line {case.bad_line}" in mismatch["detail"]
    assert "good: TL004 reported" in mismatch["detail"]
    assert row(mismatch)["verdict"] == "NOT CONFIRMED"  # whatever the runtime showed
    crashed = check_case(case, crashing)
    assert crashed["status"] == "error" and row(crashed)["verdict"] == "ERROR"
    missing = check_case(case, None, "analyzer unavailable (torchlint.engine is missing)")
    assert missing["status"] == "unavailable" and row(missing)["verdict"] == "CONFIRMED"
    assert row(ok, bad_harm=False)["verdict"] == "NOT CONFIRMED"
    assert row(ok, good_harm=True)["reason"] == "good snippet still showed the harm"
    claim = {"kind": "claim", "bad": {"harm": False}, "good": {"harm": False},
             "static": {"status": "n/a"}, "verdict": None, "reason": None}
    decide(claim)
    assert claim["verdict"] == "NOT REFUTED" and "control" in claim["reason"]


# ------------------------------------------------------------------------------------------
# The real CPU verification


@needs_torch
def test_every_case_confirmed_on_cpu(cpu_report):
    rows = [r for r in cpu_report["results"] if r["kind"] == "rule"]
    assert {r["rule"] for r in rows} == {c.rule for c in all_cases()}
    assert len(rows) == len(all_cases())
    hard_static = _lint_source_exists()
    problems = []
    for row in rows:
        # SOURCE-CHECKED: an API-change entry about torchvision/torchtext, read in their sources
        if row["verdict"] not in ("CONFIRMED", "SOURCE-CHECKED"):
            problems.append(f"{row['rule']} {row['title']}: {row['verdict']} ({row['reason']})")
        expected_static = "ok" if hard_static else "unavailable"
        if row["static"]["status"] != expected_static:
            problems.append(f"{row['rule']} {row['title']}: static {row['static']}")
        if row["verdict"] == "CONFIRMED":
            assert row["bad"]["harm"] is True, row
    assert not problems, "\n".join(problems)


@needs_torch
def test_claims_refuted_on_cpu(cpu_report):
    rows = [r for r in cpu_report["results"] if r["kind"] == "claim"]
    assert {r["rule"] for r in rows} == {c.rule for c in all_claims()}
    for row in rows:
        assert row["verdict"] == "REFUTED", row
        assert row["bad"]["harm"] is False and row["good"]["harm"] is True
        assert row["static"]["status"] == "n/a"


@needs_torch
def test_json_report_shape(cpu_report):
    assert cpu_report["version"] == 1
    env = cpu_report["environment"]
    for key in ("torch", "python", "cuda_available", "cuda_version", "devices", "analyzer"):
        assert key in env
    assert env["torch"].startswith("2.")
    cpu = env["devices"]["cpu"]
    assert cpu["available"] is True and cpu["name"] and cpu["memory_gb"] > 0
    for row in cpu_report["results"]:
        assert set(row) >= {"rule", "title", "kind", "device", "verdict", "reason", "bad", "good",
                            "static", "seconds"}
        assert row["device"] == "cpu"
        assert set(row["static"]) == {"status", "detail"}
        if row["verdict"] == "SOURCE-CHECKED":
            assert row["bad"] is None and row["good"] is None and row["reason"]
            continue
        for side in ("bad", "good"):
            assert set(row[side]) == {"harm", "evidence"}
            assert isinstance(row[side]["evidence"], str) and row[side]["evidence"]
    summary = cpu_report["summary"]
    assert sum(summary.values()) == len(cpu_report["results"])
    expected_exit = 1 if summary["NOT CONFIRMED"] or summary["ERROR"] or summary["NOT REFUTED"] else 0
    assert cpu_report["exit_code"] == expected_exit == cpu_report["_returncode"]


@needs_torch
def test_cpu_verification_is_fast(cpu_report):
    wall = cpu_report["wall_seconds"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if wall >= CPU_BUDGET_S and load > (os.cpu_count() or 1):
        pytest.skip(f"machine oversubscribed (load {load:.1f}); the run took {wall} s")
    assert wall < CPU_BUDGET_S, wall


@needs_torch
def test_evidence_is_observed(cpu_report):
    by_title = {r["title"]: r for r in cpu_report["results"]}
    tl002 = next(r for r in cpu_report["results"] if r["rule"] == "TL002")
    assert "= 2.0000" in tl002["bad"]["evidence"] and "= 1.0000" in tl002["good"]["evidence"]
    tl003 = by_title["losses.append(loss) keeps every iteration's activations alive"]
    assert "MiB of saved tensors" in tl003["bad"]["evidence"]
    leaf = by_title["leaf tensor requiring grad updated in place outside no_grad"]
    assert leaf["bad"]["evidence"].startswith("RuntimeError: a leaf Variable that requires grad")


@needs_torch
def test_text_report(cpu_report):
    from torchlint.verify.report import render_text

    text = render_text(cpu_report)
    first = text.splitlines()[0]
    assert "torch " in first and "CUDA available:" in first and "CUDA version:" in first
    assert "GB memory" in text
    for code in ("TL001", "TL006", "CLAIM-005"):
        assert code in text
    assert "CONFIRMED" in text and "REFUTED" in text
    assert "bad     → harm" in text and "good    → clean" in text


# ------------------------------------------------------------------------------------------
# Robustness: crashes, hangs and probe sanity, with test-only cases


def _case(rule: str, bad: str, good: str = "import torch\n", probe: str = "raises", **expect) -> Case:
    return Case(rule=rule, title=rule.lower(), bad=bad, good=good, bad_line=1, probe=probe,
                expect=expect, devices=("cpu",))


_HOOKED = ("import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\n"
           "model.register_forward_hook(lambda m, i, o: None)\n")

ROBUSTNESS_CASES = [
    _case("TEST-RAISES", "import torch\nraise ValueError('boom from the snippet')\n",
          exc="RuntimeError", match="x"),
    _case("TEST-WARNS",
          "import torch\nx = torch.ones(2, requires_grad=True) * 2\ng = x.grad\n",
          "import torch\nx = torch.ones(2, requires_grad=True)\ng = x.grad\n",
          probe="warns", match="is not a leaf Tensor"),
    _case("TEST-HOOKS",
          _HOOKED + "y = model.forward(torch.ones(1, 2))\n",
          _HOOKED + "y = model(torch.ones(1, 2))\n",
          probe="hooks_skipped", name="model"),
    _case("TEST-VALUE",
          "import torch\na = torch.tensor(3.0)\nb = 2\n",
          "import torch\na = torch.tensor(2.0)\nb = 2\n",
          probe="value_compare", left="a", op=">", right="b"),
    _case("TEST-HANG", "import torch\nimport time\ntime.sleep(120)\n"),
    _case("TEST-ABORT", "import torch\nimport os\nos.abort()\n"),
    _case("TEST-AFTER", "import torch\ntorch.ones(2).view(3)\n",
          "import torch\ntorch.ones(2).view(2)\n", match="is invalid for input of size"),
]


@pytest.fixture(scope="module")
def robustness_report():
    from torchlint.verify.runner import run_cases

    # No warm-up: these cases use no optimizer, and each restart then costs only `import torch`.
    return run_cases(ROBUSTNESS_CASES, devices=["cpu"], timeout=3, warm_up=False)


@needs_torch
def test_unexpected_exception_is_error(robustness_report):
    row = robustness_report["results"][0]
    assert row["rule"] == "TEST-RAISES" and row["verdict"] == "ERROR"
    assert "bad snippet raised ValueError: boom from the snippet (snippet line 2)" == row["reason"]


@needs_torch
def test_hang_is_error_and_run_goes_on(robustness_report):
    rows = {r["rule"]: r for r in robustness_report["results"]}
    assert rows["TEST-HANG"]["verdict"] == "ERROR"
    assert rows["TEST-HANG"]["reason"].startswith("timed out after 3 s")
    assert rows["TEST-ABORT"]["verdict"] == "ERROR"
    assert "child process died (signal SIGABRT)" in rows["TEST-ABORT"]["reason"]
    assert 'File "<snippet>", line 3' in rows["TEST-ABORT"]["reason"]  # from faulthandler
    after = rows["TEST-AFTER"]
    assert after["verdict"] == "CONFIRMED", after  # a fresh child ran it
    assert "is invalid for input of size 2" in after["bad"]["evidence"]
    assert robustness_report["exit_code"] == 1
    assert robustness_report["summary"]["ERROR"] == 3


@needs_torch
def test_probe_sanity(robustness_report):
    rows = {r["rule"]: r for r in robustness_report["results"]}
    for code in ("TEST-WARNS", "TEST-HOOKS", "TEST-VALUE"):
        assert rows[code]["verdict"] == "CONFIRMED", rows[code]
        assert rows[code]["static"]["status"] == "n/a"
    assert rows["TEST-WARNS"]["bad"]["evidence"].startswith("UserWarning: The .grad attribute")
    assert rows["TEST-HOOKS"]["bad"]["evidence"] == "Linear.forward ran 1×, its forward hooks fired 0×"
    assert rows["TEST-HOOKS"]["good"]["evidence"] == "Linear.forward ran 1×, its forward hooks fired 1×"
    assert rows["TEST-VALUE"]["bad"]["evidence"] == "a = 3, b = 2; `a > b` is True"


# ------------------------------------------------------------------------------------------
# CUDA


@needs_torch
def test_cuda_absent_is_skipped(cpu_report):
    if cpu_report["environment"]["cuda_available"]:
        pytest.skip("a GPU is present; test_cuda_cases_confirmed covers it")
    from torchlint.verify.runner import run_cases

    report = run_cases(select_cases(["TL004"]), devices=["cuda"])
    assert {r["verdict"] for r in report["results"]} == {"SKIPPED"}
    assert all(r["reason"].startswith("cuda is not available") for r in report["results"])
    assert report["environment"]["devices"]["cuda"]["available"] is False
    assert report["exit_code"] == 0


@needs_torch
def test_cuda_cases_confirmed(cpu_report):
    if not cpu_report["environment"]["cuda_available"]:
        pytest.skip("no CUDA device")
    result = _verify("--claims", "--device", "cuda", "--output-format", "json", timeout=300)
    report = json.loads(result.stdout)
    for row in report["results"]:
        assert row["verdict"] in ("CONFIRMED", "REFUTED", "SKIPPED"), row
