"""The legacy-PyTorch rules TL201–TL208: facts they rely on (checked against torch 2.13's own
code where torch is installed, in a subprocess), their fixes, and TL204's way past the syntax
error (`torchlint/legacy_syntax.py`): positions, fixes, notebooks, flake8, the cache."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchlint import legacy_syntax
from torchlint.analysis import legacy
from torchlint.engine import lint_source, parse, select_rules
from torchlint.finding import Applicability
from torchlint.fixer import fix_data, fix_text
from torchlint.notebook import lint_notebook
from torchlint.verify.runner import torch_available

ROOT = Path(__file__).resolve().parent.parent
ALL = select_rules(["TL"])
needs_torch = pytest.mark.skipif(not torch_available(), reason="torch is not installed")


def lint(source: str, code: str = "TL"):
    return [f for f in lint_source(textwrap.dedent(source), select=[code]) if f.code.startswith(code)]


def fixed(source: str, codes=("TL",), unsafe: bool = False) -> str:
    outcome = fix_text(textwrap.dedent(source), "<s>", select_rules(list(codes)), unsafe)
    assert not outcome.invalid
    return outcome.text


def python(code: str) -> str:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


# -- TL204: the `async=` sites and the way back ------------------------------------------------

@pytest.mark.parametrize("source, sites", [
    ("x.cuda(async=True)\n", [(1, 7, "cuda")]),
    ("y = x.to(d, async=True); z = w.cuda(0, async=False)\n", [(1, 12, "to"), (1, 39, "cuda")]),
    ("dst.copy_(src,\n          async=True)\n", [(2, 10, "copy_")]),
    ("h = x.type(torch.cuda.HalfTensor, async=True)\n", [(1, 34, "type")]),
    ("f(async=True)\n", []),  # not one of the methods that took it: stays a syntax error
    ("def f(async=True): pass\n", []),
    ("x.cuda(y.async)\n", []),
    ("x.cuda(async == 1)\n", []),
    ("s = 'x.cuda(async=True)'  # x.cuda(async=True)\n", []),
    ("x.cuda(f(async=True))\n", []),  # the innermost call is f's
    ("x.cuda([async=True])\n", []),
    ("x.cuda(async=True\n", []),  # does not tokenize: nothing to recover
])
def test_async_keyword_sites(source, sites):
    assert [(s.row, s.column, s.method) for s in legacy_syntax.async_keyword_sites(source)] == sites


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_recovery_keeps_rows_and_maps_columns_back(newline):
    text = "import torch\na = x.cuda(async=True); b = y.cuda(async=True).t()\n".replace("\n", newline)
    recovery = legacy_syntax.recover(text)
    assert recovery.text == text.replace("async", "non_blocking")
    line = recovery.text.split(newline)[1]
    # columns after the first, inside the second and after the second rewritten keyword
    assert recovery.original_column(2, line.index("b =")) == "a = x.cuda(async=True); ".index("; ") + 2
    inside = line.index("non_blocking", line.index("b =")) + 3
    assert recovery.original_column(2, inside) == text.split(newline)[1].index("async", 20)
    assert recovery.original_column(2, inside, end=True) == text.split(newline)[1].index("async", 20) + 5
    assert recovery.original_column(1, 5) == 5
    assert recovery.original_column(2, len(line)) == len(text.split(newline)[1])


def test_tl204_reported_instead_of_tl901_and_the_rest_is_linted():
    source = """\
        import torch
        def f(loader, x):
            for images, target in loader:
                target = target.cuda(async=True); y = images.cuda(0, async=True).transpose(0, 1).view(-1)
    """
    findings = lint(source)
    line = textwrap.dedent(source).splitlines()[3]
    assert [(f.code, f.start.row, f.start.column) for f in findings] == [
        ("TL204", 4, line.index("async") + 1),
        ("TL204", 4, line.index("async", 40) + 1),
        ("TL004", 4, line.index("view") + 1),
    ]
    tl004 = findings[2]
    edit = tl004.fix.edits[0]
    assert (edit.start.column, edit.end.column) == (line.index("view") + 1, line.index("view") + 1 + len("view"))
    assert all(not f.is_diagnostic for f in findings)
    assert "non_blocking=True" in findings[0].message and findings[0].fix.applicability == Applicability.SAFE


def test_other_syntax_errors_stay_tl901():
    python2 = "import torch\nx = y.cuda(async=True)\nprint 'loss', x\n"
    assert [f.code for f in lint(python2)] == ["TL901"]
    assert [f.code for f in lint("x = f(async=True)\n")] == ["TL901"]
    assert [f.code for f in lint("def f(async=True):\n    pass\n")] == ["TL901"]


def test_without_tl204_the_file_is_a_syntax_error_as_before():
    source = "import torch\ny = x.cuda(async=True).t().view(-1)\n"
    assert [f.code for f in lint_source(source, select=["TL004"])] == ["TL901"]
    assert [f.code for f in lint_source(source, select=["TL"], ignore=["TL204"])] == ["TL901"]
    assert [f.code for f in lint_source(source, select=["TL204", "TL004"])] == ["TL204", "TL004"]


def test_noqa_on_tl204_still_lints_and_fixes_the_rest():
    source = "import torch\ny = x.cuda(async=True)  # noqa: TL204\nz = x.t().view(-1)\n"
    assert [f.code for f in lint(source)] == ["TL004"]
    outcome = fix_text(source, "<s>", ALL)
    assert not outcome.invalid
    assert outcome.text == source.replace("t().view", "t().contiguous().view")


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_tl204_fix_parses_keeps_line_endings_and_is_idempotent(newline):
    source = (ROOT / "fixtures" / "TL204" / "async_copies.py").read_text(encoding="utf-8").replace("\n", newline)
    result = fix_data("f.py", source.encode(), ALL, True)
    text = result.new.decode()
    assert text.count("async=") == source.count("async=") - 6  # a docstring, a string and a comment keep theirs
    assert text.count("non_blocking=") == 6
    assert isinstance(parse(text, "f.py"), cst.Module)
    assert not any(f.is_diagnostic for f in result.result.findings)
    if newline == "\r\n":
        assert "\n" not in text.replace("\r\n", "")
    again = fix_data("f.py", result.new, ALL, True)
    assert again.new == result.new and not again.fixed


def test_tl204_fix_and_an_overlapping_fix_give_code_that_parses():
    # TL202's fix rewrites the whole call; its text comes from the recovered code
    source = "from torch.autograd import Variable\nv = Variable(x.cuda(async=True), volatile=True)\n"
    assert fixed(source, unsafe=True) == "from torch.autograd import Variable\nv = Variable(x.cuda(non_blocking=True))\n"
    assert fixed(source) == source.replace("async", "non_blocking")


def test_tl204_through_the_cli_and_the_cache(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("import torch\ntarget = target.cuda(async=True)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "torchlint", "--cache-dir", str(tmp_path / "cache"), "--output-format", "json",
               str(path)]
    runs = [subprocess.run(command, capture_output=True, text=True, env=env, timeout=120) for _ in range(2)]
    for run in runs:
        assert run.returncode == 1, run.stderr
        assert [(f["code"], f["location"]) for f in json.loads(run.stdout)] == [("TL204", {"row": 2, "column": 22})]
    fix = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "--fix", str(path)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert path.read_text() == "import torch\ntarget = target.cuda(non_blocking=True)\n"


def _notebook(*sources: str) -> bytes:
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": source.splitlines(keepends=True)} for source in sources]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1).encode()


def test_tl204_in_a_notebook_cell_keeps_the_cells_joined():
    data = _notebook("import torch\nfrom torch.autograd import Variable\n",
                     "%matplotlib inline\nx = Variable(images.cuda(async=True), volatile=True)\n")
    result = lint_notebook("n.ipynb", data, ALL)
    # TL202 needs the import of the first cell: the cells were linted together
    assert sorted((f.code, f.cell, f.start.row, f.start.column) for f in result.findings) == [
        ("TL202", 2, 2, 39), ("TL204", 2, 2, 26)]
    fix = fix_data("n.ipynb", data, ALL, False)
    cell = json.loads(fix.new)["cells"][1]["source"]
    assert cell == ["%matplotlib inline\n", "x = Variable(images.cuda(non_blocking=True), volatile=True)\n"]


def test_flake8_reports_e999_for_an_async_file(tmp_path):
    from importlib.metadata import entry_points

    if not any(ep.name == "TL" for ep in entry_points(group="flake8.extension")):
        pytest.skip("torchlint is not installed as a flake8 plugin here")
    path = tmp_path / "train.py"
    path.write_text("import torch\ny = x.t().view(-1)\ntarget = target.cuda(async=True)\n")
    result = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "TL,E999", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert [line.split(": ")[1].split()[0] for line in result.stdout.splitlines()] == ["E999"]


# -- TL201 ---------------------------------------------------------------------------------------

def test_tl201_data_index_fix_is_safe_plain_index_unsafe():
    findings = lint("""\
        import torch.nn as nn
        criterion = nn.MSELoss()
        loss = criterion(a, b)
        x = loss.data[0]
        y = loss[0]
        """, "TL201")
    assert [(f.start.row, f.fix.applicability, f.fix.edits[0].content) for f in findings] == [
        (4, Applicability.SAFE, "loss.item()"), (5, Applicability.UNSAFE, "loss.item()")]


@pytest.mark.parametrize("construction, flagged", [
    ("nn.CrossEntropyLoss()", True),
    ("nn.CrossEntropyLoss().cuda()", True),
    ("nn.CrossEntropyLoss(reduction='sum')", True),
    ("nn.CrossEntropyLoss(reduction='none')", False),
    ("nn.CrossEntropyLoss(reduce=False)", False),
    ("nn.CrossEntropyLoss(size_average=False)", True),
    ("nn.CrossEntropyLoss(None, True, -100, False)", False),  # reduce=False by position
    ("nn.HuberLoss('none')", False),  # a loss whose reduction comes first
    ("nn.CTCLoss()", True),
    ("make_loss()", False),
])
def test_tl201_criterion_reduction(construction, flagged):
    findings = lint(f"import torch.nn as nn\ncriterion = {construction}\nloss = criterion(a, b)\nv = loss.data[0]\n",
                    "TL201")
    assert bool(findings) is flagged


def test_tl201_follows_parameters_and_accumulators():
    findings = lint("""\
        import torch.nn as nn
        def train(loader, model, criterion):
            for x, y in loader:
                loss = criterion(model(x), y)
                print(loss.data[0])
        def seq(steps, criterion):
            loss = 0
            for out, y in steps:
                loss += criterion(out, y)
            return loss.data[0] / len(steps)
        def main(loader, model):
            criterion = nn.CrossEntropyLoss().cuda()
            train(loader, model, criterion)
            seq([], nn.NLLLoss())
        """, "TL201")
    assert [f.start.row for f in findings] == [5, 10]


def test_tl201_parameter_passed_something_else_is_silent():
    assert lint("""\
        import torch.nn as nn
        def train(loader, criterion):
            for x, y in loader:
                print(criterion(x, y).data[0])
        train(a, nn.CrossEntropyLoss())
        train(b, nn.CrossEntropyLoss(reduction="none"))
        """, "TL201") == []


def test_tl201_full_reduction_data_index_needs_a_torch_file():
    assert lint("import numpy as np\nprint(np.ones(3).sum().data[0])\n", "TL201") == []
    assert len(lint("import torch\nprint(x.sum().data[0])\n", "TL201")) == 1


def test_tl201_self_referencing_names_terminate():
    assert lint("""\
        import torch
        def f(xs, y):
            acc = torch.zeros(1)
            for x in xs:
                acc = (acc == y).sum() + acc
                acc = acc * acc.sum()
            return acc[0]
        """, "TL201") == []


# -- TL206: the reduction mapping and the signatures, against torch ---------------------------

def test_tl206_mapping_is_torchs():
    expected = {}
    for size_average, reduce in itertools.product((None, True, False), repeat=2):
        expected[(size_average, reduce)] = legacy.reduction_for(size_average, reduce)
    assert expected[(False, None)] == "sum" and expected[(True, False)] == "none" and expected[(None, None)] == "mean"
    if not torch_available():
        pytest.skip("torch is not installed")
    measured = json.loads(python("""\
        import itertools, json
        from torch.nn import _reduction
        print(json.dumps([[a, b, _reduction.legacy_get_string(a, b, emit_warning=False)]
                          for a, b in itertools.product((None, True, False), repeat=2)]))
        """))
    assert {(a, b): r for a, b, r in measured} == expected


@needs_torch
def test_tl206_signature_table_is_torchs():
    measured = json.loads(python("""\
        import inspect, json
        import torch.nn as nn, torch.nn.functional as F
        table = {}
        for name in dir(nn):
            obj = getattr(nn, name)
            if isinstance(obj, type) and issubclass(obj, nn.Module):
                params = list(inspect.signature(obj.__init__).parameters)[1:]
                if "size_average" in params:
                    table["nn." + name] = params
        for name in dir(F):
            obj = getattr(F, name)
            try:
                params = list(inspect.signature(obj).parameters)
            except (TypeError, ValueError):
                continue
            if "size_average" in params:
                table["F." + name] = params
        print(json.dumps(table))
        """))
    ours = {f"nn.{k}": list(v) for k, v in legacy._LOSS_CLASSES.items()}
    ours.update({f"F.{k}": list(v) for k, v in legacy._LOSS_FUNCTIONS.items()})
    assert ours == measured


def test_tl206_fix_keywords_the_arguments_after_a_positional_flag():
    assert fixed("import torch.nn as nn\nc = nn.CrossEntropyLoss(w, False, -1, True)\n", ["TL206"]) == \
        'import torch.nn as nn\nc = nn.CrossEntropyLoss(w, reduction="sum", ignore_index=-1)\n'


# -- TL207, TL208 ---------------------------------------------------------------------------------

def test_tl207_fix_moves_the_step_after_the_batches():
    source = """\
        import torch
        from torch.optim import lr_scheduler
        scheduler = lr_scheduler.StepLR(optimizer, 1)
        for epoch in range(3):
            scheduler.step()
            for x in loader:
                optimizer.step()
            log(epoch)
        """
    assert fixed(source, ["TL207"]) == textwrap.dedent(source)
    assert fixed(source, ["TL207"], unsafe=True) == textwrap.dedent("""\
        import torch
        from torch.optim import lr_scheduler
        scheduler = lr_scheduler.StepLR(optimizer, 1)
        for epoch in range(3):
            for x in loader:
                optimizer.step()
            scheduler.step()
            log(epoch)
        """)


def test_tl207_scheduler_bound_to_something_else_is_silent():
    assert lint("""\
        import torch
        from torch.optim import lr_scheduler
        s = lr_scheduler.StepLR(optimizer, 1)
        def run(optimizer, loader):
            scheduler = NoamScheduler(optimizer)
            for epoch in range(3):
                scheduler.step()
                for x in loader:
                    optimizer.step()
        """, "TL207") == []


@needs_torch
def test_tl208_upsample_replacements_compute_the_same():
    out = python("""\
        import warnings
        warnings.simplefilter("ignore")
        import torch, torch.nn.functional as F
        x = torch.randn(2, 3, 5, 7)
        same = [
            torch.equal(F.upsample_bilinear(x, scale_factor=2),
                        F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)),
            torch.equal(F.upsample_bilinear(x, (9, 4)), F.interpolate(x, (9, 4), mode="bilinear", align_corners=True)),
            torch.equal(F.upsample_nearest(x, scale_factor=3), F.interpolate(x, scale_factor=3)),
            torch.equal(F.upsample(x, None, 2, "bicubic"), F.interpolate(x, None, 2, "bicubic")),
            not torch.equal(F.upsample_bilinear(x, scale_factor=2), F.interpolate(x, scale_factor=2, mode="bilinear")),
        ]
        print(all(same))
        """)
    assert out.strip() == "True"


@pytest.mark.parametrize("code", [f"TL20{n}" for n in range(1, 9)])
def test_every_legacy_rule_is_a_full_unit(code):
    from torchlint.rules import get_rule

    rule = get_rule(code)
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:", "## Fix safety",
                    "## References"):
        assert section in rule.docs, (code, section)
    measured = "Python 3.11" if code == "TL204" else "torch 2.13"  # TL204's error is Python's own
    assert measured in " ".join(rule.docs.split())  # the behaviour is the one measured, with the version
    assert rule.triggers and rule.confirmation_module == code.lower()
    assert (ROOT / "torchlint" / "verify" / "cases" / f"{rule.confirmation_module}.py").exists()
