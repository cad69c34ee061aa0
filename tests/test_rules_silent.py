"""Rules TL110–TL117 (silent training bugs, issue 23): metadata and docs, the static side of the
confirmation cases, severities decided per finding, fixes, and the facts in
torchlint/analysis/silent.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchlint.analysis import silent
from torchlint.analysis.semantic import Semantic
from torchlint.engine import lint_source, select_rules
from torchlint.finding import Applicability, Severity
from torchlint.fixer import fix_text
from torchlint.rules import get_rule

CODES = ["TL110", "TL111", "TL112", "TL113", "TL114", "TL115", "TL116", "TL117"]
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def lint(source: str, code: str, path: str = "t.py"):
    return [f for f in lint_source(textwrap.dedent(source), path, select=[code]) if f.code == code]


@pytest.mark.parametrize("code", CODES)
def test_rule_metadata_and_docs(code):
    rule = get_rule(code)
    assert rule is not None
    assert rule.name == rule.name.lower() and " " not in rule.name
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:",
                    "## Fix safety", "## References"):
        assert section in rule.docs, (code, section)
    assert rule.confirmation_module == code.lower()
    assert rule.triggers
    assert isinstance(rule.default_severity, Severity)


@pytest.mark.parametrize("code", CODES)
def test_cases_flagged_statically(code):
    from torchlint.verify.cases import all_cases

    cases = all_cases([code])
    assert cases
    for case in cases:
        bad = [f.start.row for f in lint_source(case.bad, "bad.py", select=[code]) if f.code == code]
        good = [f for f in lint_source(case.good, "good.py", select=[code]) if f.code == code]
        assert case.bad_line in bad, (code, case.title, bad)
        assert not good, (code, case.title)


# -- severities ----------------------------------------------------------------------------------

def severities(path: str, code: str) -> dict:
    source = (FIXTURES / path).read_text(encoding="utf-8")
    return {f.start.row: f.severity for f in lint_source(source, path, select=[code]) if f.code == code}


def test_tl110_severity_follows_later_reads():
    found = severities("TL110/severity.py", "TL110")
    assert found == {10: Severity.ERROR, 12: Severity.NOTE, 19: Severity.ERROR}  # 19: read on the next iteration
    found = severities("TL110/discarded.py", "TL110")
    assert found[17] == found[32] == found[33] == Severity.ERROR  # dropout unused; batch unmoved
    assert found[39] == found[40] == Severity.NOTE  # loop locals never read again
    assert found[45] == Severity.ERROR


def test_tl114_sigmoid_into_cross_entropy_is_a_warning():
    # Issue 40: it still trains and the argmax is unchanged; the loss has a floor.
    assert set(severities("TL114/sigmoid_ce.py", "TL114").values()) == {Severity.WARNING}


def test_tl111_train_without_eval_is_a_warning():
    assert severities("TL111/train_only.py", "TL111") == {7: Severity.WARNING}
    assert set(severities("TL111/not_called.py", "TL111").values()) == {Severity.ERROR}


@pytest.mark.parametrize("code, path", [("TL112", "TL112/in_forward.py"), ("TL113", "TL113/ranks.py"),
                                        ("TL116", "TL116/numpy_grad.py"), ("TL117", "TL117/gan_step.py")])
def test_errors(code, path):
    assert set(severities(path, code).values()) == {Severity.ERROR}


def test_tl115_nan_against_nan_is_a_note():
    found = severities("TL115/nan.py", "TL115")
    assert found.pop(18) == Severity.NOTE
    assert set(found.values()) == {Severity.ERROR}


# -- TL110 and TL007 -----------------------------------------------------------------------------

LOOP = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 2).to(device)
loader = DataLoader(dataset, batch_size=8)
for data, target in loader:
{move}    output = model(data)
"""


def test_no_op_move_is_flagged_where_tl007_is_silent():
    with_line = LOOP.format(move="    data.to(device)\n")
    without = LOOP.format(move="")
    assert [f.start.row for f in lint(with_line, "TL110")] == [8]
    assert lint(with_line, "TL110")[0].severity == Severity.ERROR
    # TL007 treats a bare `batch.to(device)` as a possible in-place move: silent with the line,
    # and it fires once the line is deleted.
    assert not lint(with_line, "TL007")
    assert [f.start.row for f in lint(without, "TL007")] == [8]


def test_notebook_top_level_is_displayed_not_discarded():
    source = "import torch\nx = torch.randn(3)\nx.t()\nmodel = torch.nn.Linear(2, 2)\nmodel.eval\n"
    assert lint(source, "TL110", "a.py") and lint(source, "TL111", "a.py")
    assert not lint(source, "TL110", "nb.ipynb") and not lint(source, "TL111", "nb.ipynb")


# -- fixes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("path", sorted(p for code in CODES for p in (FIXTURES / code).glob("*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixing_twice_equals_fixing_once(path, unsafe):
    rules = select_rules(CODES)
    text = path.read_text(encoding="utf-8")
    once = fix_text(text, path.name, rules, unsafe)
    assert not once.invalid
    again = fix_text(once.text, path.name, rules, unsafe)
    assert again.count == 0 and again.text == once.text


def test_tl110_fix_is_safe_only_for_a_dead_line():
    source = (FIXTURES / "TL110/severity.py").read_text(encoding="utf-8")
    found = {f.start.row: f.fix.applicability for f in lint_source(source, "s.py", select=["TL110"])}
    assert found == {10: Applicability.UNSAFE, 12: Applicability.SAFE, 19: Applicability.UNSAFE}


def test_tl116_fix_inserts_detach():
    source = "import torch\nw = torch.randn(3, requires_grad=True)\na = (w * 2).cpu().numpy()\n"
    fixed = fix_text(source, "s.py", select_rules(["TL116"]), False)
    assert fixed.text.endswith("a = (w * 2).cpu().detach().numpy()\n")


def test_tl115_fix_needs_the_module_name():
    source = "import torch as T\nloss = T.zeros(())\nif loss == float('nan'):\n    pass\n"
    (finding,) = lint(source, "TL115")
    assert finding.fix is None  # `torch` is not a name here


def test_tl115_advice_for_pandas_and_numpy_values():
    # The ML-smells catalogue's example: torch.isnan / math.isnan take no DataFrame.
    source = "import numpy as np\nimport pandas as pd\ndf = pd.DataFrame([1, None, 3])\nm = df == np.nan\n"
    (finding,) = lint(source, "TL115")
    assert finding.message.endswith("use `df.isna()`"), finding.message
    source = "import numpy as np\na = np.zeros(3)\nm = a != np.nan\n"
    (finding,) = lint(source, "TL115")
    assert finding.message.endswith("use `~np.isnan(a)`"), finding.message


# -- facts ---------------------------------------------------------------------------------------

def model(source: str) -> Semantic:
    return Semantic(cst.parse_module(textwrap.dedent(source)))


@pytest.mark.parametrize("expr, expected", [
    ("float('nan')", True), ("float('NaN')", True), ("-float('nan')", True), ("math.nan", True),
    ("np.nan", True), ("np.NaN", True), ("torch.nan", True),
    ("float('inf')", False), ("nan", False), ("np.inf", False), ("float(x)", False),
])
def test_is_nan_constant(expr, expected):
    sem = model(f"import math\nimport numpy as np\nimport torch\nvalue = {expr}\n")
    assign = sem.index.nodes(cst.Assign)[-1]
    assert silent.is_nan_constant(sem, assign.value) is expected


@pytest.mark.parametrize("layer, expected", [
    ("nn.Linear(4, 4)", "Linear"), ("nn.Conv2d(3, 8, 3)", "Conv2d"), ("nn.LayerNorm(8)", "LayerNorm"),
    ("nn.ReLU()", None), ("nn.Dropout(0.5)", None), ("nn.Flatten()", None), ("nn.Softmax(1)", None),
    ("nn.LayerNorm(8, elementwise_affine=False)", None), ("nn.CrossEntropyLoss()", None),
])
def test_parametric_module(layer, expected):
    sem = model(f"import torch.nn as nn\nlayer = {layer}\n")
    call = sem.index.nodes(cst.Assign)[-1].value
    assert silent.parametric_module(sem, call) == expected


# -- torchlint run: how the run recognises TL113 / TL116 (no torch needed) -----------------------

@pytest.mark.parametrize("kind, message, family", [
    ("ValueError", "expected 4D input (got 2D input)", "TL113"),
    ("ValueError", "expected 2D or 3D input (got 4D input)", "TL113"),
    ("ValueError", "expected 5D input (got 4D input)", "TL113"),
    ("RuntimeError", "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
     "TL116"),
    ("ValueError", "something else: expected 4D input (got 2D input)", None),
    ("RuntimeError", "expected 4D input (got 2D input)", None),
])
def test_run_signatures(kind, message, family):
    from torchlint.runtime import signatures

    assert signatures.exception_family(kind, message) == family
    if family is not None:
        assert family in signatures.CODES


@pytest.mark.parametrize("layers, advice", [
    ("nn.Flatten(), nn.Linear(8, 4), nn.BatchNorm2d(4)", "nn.BatchNorm1d"),
    ("nn.Conv2d(3, 4, 3), nn.BatchNorm1d(4)", "nn.BatchNorm2d"),
    ("nn.Conv2d(3, 4, 3), nn.BatchNorm3d(4)", "nn.BatchNorm2d"),
    ("nn.Conv1d(3, 4, 3), nn.BatchNorm2d(4)", "nn.BatchNorm1d"),
    ("nn.Conv3d(3, 4, 3), nn.BatchNorm1d(4)", "nn.BatchNorm3d"),
])
def test_tl113_suggests_the_batchnorm_of_the_rank(layers, advice):
    (finding,) = lint(f"import torch.nn as nn\nnet = nn.Sequential({layers})\n", "TL113")
    assert finding.message.endswith(f"use `{advice}`"), finding.message


def test_tl117_is_a_run_code():
    from torchlint.runtime import signatures

    assert "TL117" in signatures.CODES
    # the backward error itself is the saved-modified family: the run tells TL117 from TL001 by
    # whether the tensor is a parameter an optimizer stepped (fixtures/run/tl117_bad.py)
    message = ("one of the variables needed for gradient computation has been modified by an inplace operation: "
               "[torch.FloatTensor [16, 1]], which is output 0 of T, is at version 2; expected version 1 instead.")
    assert signatures.exception_family("RuntimeError", message) == signatures.SAVED_MODIFIED


def test_tl117_message_names_the_forward_the_step_and_the_error():
    source = (FIXTURES / "TL117/gan_step.py").read_text(encoding="utf-8")
    found = {f.start.row: f.message for f in lint_source(source, "gan.py", select=["TL117"])}
    reused = found[26]
    assert "`D(fake)` (line 19)" in reused and "`opt_d.step()` (line 23)" in reused
    assert "modified by an inplace operation" in reused
    freed = found[50]  # the discriminator's backward ran without retain_graph
    assert "Trying to backward through the graph a second time" in freed and "(line 46) freed it" in freed
    first = found[61]  # the generator's step came first: G's weights changed
    assert "`G(z)`" in first and "`opt_g.step()`" in first


def test_tl117_names_no_row_of_the_joined_cells_in_a_notebook():
    source = (FIXTURES / "TL117/gan_step.py").read_text(encoding="utf-8")
    findings = lint(source, "TL117", "gan.ipynb")
    assert findings and all("(line " not in f.message for f in findings)


def test_tl117_retain_variables_keeps_the_graph():
    source = """\
    import torch
    import torch.nn as nn
    G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
    D = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_d = torch.optim.Adam(D.parameters())
    out = D(G(torch.randn(2, 4)))
    out.mean().backward(retain_variables=True)
    opt_d.step()
    out.sum().backward()
    """
    (finding,) = lint(source, "TL117")
    assert finding.start.row == 9 and "modified by an inplace operation" in finding.message
