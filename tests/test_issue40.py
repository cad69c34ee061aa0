"""Issue 40: findings that were false on real code (notebook cells as IPython runs them, pinned
releases) and the severity each finding gets from the program's facts. The single-file patterns
are fixtures (`fixtures/TL*/`); this module holds what a fixture cannot say: notebooks, severities
and messages."""

from __future__ import annotations

import json
import textwrap

from torchlint.engine import lint_source
from torchlint.finding import Severity
from torchlint.notebook import lint_notebook
from torchlint.rules import all_rules


def _notebook(*cells: str) -> bytes:
    return json.dumps({"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [],
                                  "execution_count": None} for c in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def _codes(data: bytes, select=None):
    rules = [r for r in all_rules() if select is None or r.code in select]
    return sorted((f.code, f.cell, f.start.row) for f in lint_notebook("nb.ipynb", data, rules).findings)


def lint(source: str, code: str):
    return [f for f in lint_source(textwrap.dedent(source), select=[code]) if f.code == code]


def one(source: str, code: str):
    found = lint(source, code)
    assert len(found) == 1, [f.message for f in found]
    return found[0]


# -- TL901: cells IPython runs -------------------------------------------------------------------

def test_automagic_pip_without_percent_is_not_a_syntax_error():
    data = _notebook("pip install torchviz\n", "import torch\nx = torch.randn(3, 4)\ny = x.t().view(-1)\n")
    assert _codes(data) == [("TL004", 2, 3)]


def test_automagic_is_python_where_the_line_is_python():
    # `time = 3` assigns, `cd(x)` calls: IPython keeps both as Python, so must the linter.
    data = _notebook("def cd(p):\n    return p\ntime = 3\ncd(time)\nimport torch\n"
                     "y = torch.randn(3, 4).t().view(-1)\n")
    assert _codes(data) == [("TL004", 1, 6)]


def test_a_cell_indented_as_a_whole_is_linted_as_ipython_strips_it():
    data = _notebook("import torch\n", "    x = torch.randn(3, 4)\n    y = x.t().view(-1)\n",
                     "\tz = x.permute(1, 0)\n\tw = z.view(-1)\n")
    assert _codes(data) == [("TL004", 2, 2), ("TL004", 3, 2)]


def test_a_statement_split_over_cells_still_fails():
    data = _notebook("import torch\nfor i in range(3):\n", "    print(i)\n")
    assert [c for c, _, _ in _codes(data)] == ["TL901"]


# -- TL209: the notebook's own pin ---------------------------------------------------------------

def test_torchtext_pinned_by_a_pip_cell_keeps_its_legacy_api():
    legacy = "from torchtext.data import Field, BucketIterator\nSRC = Field(lower=True)\n"
    assert _codes(_notebook("!pip install torchtext==0.6.0\n", legacy), {"TL209"}) == []
    assert _codes(_notebook("pip install torchtext==0.6.0\n", legacy), {"TL209"}) == []
    assert {c for c, _, _ in _codes(_notebook("!pip install torchtext\n", legacy), {"TL209"})} == {"TL209"}
    newer = _notebook("%pip install torchtext==0.9.0\n", legacy)
    assert {c for c, _, _ in _codes(newer, {"TL209"})} == {"TL209"}


# -- TL211 -----------------------------------------------------------------------------------------

def _tl211(path: str = "fixtures/TL211/checkpointer_and_pairing.py"):
    from pathlib import Path

    source = (Path(__file__).resolve().parent.parent / path).read_text(encoding="utf-8")
    return {f.start.row: f for f in lint_source(source, path, select=["TL211"]) if f.code == "TL211"}


def test_tl211_severities_follow_what_is_certain():
    found = _tl211()
    assert found[18].severity is Severity.ERROR and "'options'" in found[18].message
    assert "saved at line 20" in found[18].message and found[18].fix is None
    assert found[30].severity is Severity.ERROR and "`'scores'`: a NumPy" in found[30].message
    assert "may" not in found[30].message
    assert found[35].severity is Severity.WARNING and "starts from scratch" in found[35].message
    # paired with no save: the saves write other files
    assert found[28].severity is Severity.NOTE and "whole_model" not in found[28].message


def test_tl211_cross_file_message_names_the_culprit_and_where():
    source = """
        import torch
        ckpt = torch.load("checkpoint.pth")
    """
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        open(os.path.join(root, "pyproject.toml"), "w").close()
        with open(os.path.join(root, "train.py"), "w") as handle:
            handle.write("import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                         "args = parser.parse_args()\nmodel = torch.nn.Linear(2, 2)\n"
                         "torch.save({'args': args, 'model': model.state_dict()}, 'checkpoint.pth')\n")
        path = os.path.join(root, "predict.py")
        with open(path, "w") as handle:
            handle.write(textwrap.dedent(source))
        (finding,) = [f for f in lint_source(textwrap.dedent(source), path, select=["TL211"])]
    assert finding.severity is Severity.ERROR
    assert "saved at train.py:6" in finding.message and "`'args'`: an argparse.Namespace" in finding.message


# -- TL008 -----------------------------------------------------------------------------------------

def test_tl008_note_where_the_computed_device_is_never_used():
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "fixtures/TL008/unused_device_choice.py"
    found = [f for f in lint_source(path.read_text(encoding="utf-8"), str(path), select=["TL008"])]
    assert [f.severity for f in found] == [Severity.NOTE, Severity.NOTE]
    assert "never used" in found[0].message
    used = """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.nn.Linear(2, 2).to(device)
        x = torch.randn(2).cuda()
    """
    assert one(used, "TL008").severity is Severity.ERROR


# -- TL106 -----------------------------------------------------------------------------------------

EVALUATE = """
    import torch
    import torch.nn as nn
    model = nn.Linear(4, 2)
    criterion = nn.CrossEntropyLoss()
    def evaluate(loader):
        model.eval()
        {before}
        for x, y in loader:
            out = model(x)
            {keep}
"""


def test_tl106_note_when_each_graph_is_freed_warning_when_kept():
    freed = one(EVALUATE.format(before="hits = 0", keep="hits += (out.argmax(1) == y).sum().item()"), "TL106")
    assert freed.severity is Severity.NOTE and "freed" in freed.message
    for before, keep in (("outs = []", "outs.append(out)"), ("total = 0", "total += criterion(out, y)")):
        kept = one(EVALUATE.format(before=before, keep=keep), "TL106")
        assert kept.severity is Severity.WARNING and "across batches" in kept.message, keep
    fresh = one(EVALUATE.format(before="", keep="row = []\n            row.append(out)"), "TL106")
    assert fresh.severity is Severity.NOTE


# -- TL112 / TL114 ---------------------------------------------------------------------------------

def test_tl112_layernorm_is_not_random_and_a_warning():
    source = """
        import torch.nn as nn
        class Block(nn.Module):
            def forward(self, h):
                h = nn.LayerNorm(h.shape[-1])(h)
                h = nn.RMSNorm(h.shape[-1])(h)
                return nn.Linear(8, 8)(h)
    """
    found = lint(source, "TL112")
    assert [f.severity for f in found] == [Severity.WARNING, Severity.WARNING, Severity.ERROR]
    assert "weight starts at 1 and its bias at 0" in found[0].message and "random" in found[0].message
    assert "not random" in found[0].message and "bias" not in found[1].message.split("(not random)")[0]
    assert "random weights" in found[2].message


# -- TL120 -----------------------------------------------------------------------------------------

def test_tl120_note_when_no_optimizer_holds_the_parameters():
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "fixtures/TL120/optimizer_over_other_parts.py"
    found = {f.start.row: f for f in lint_source(path.read_text(encoding="utf-8"), str(path), select=["TL120"])}
    assert found[10].severity is Severity.NOTE and "`net[1].parameters()`" in found[10].message
    assert found[14].severity is Severity.ERROR


# -- a branch the default configuration never takes ------------------------------------------------

def test_findings_on_branches_off_by_default_are_one_step_lower():
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "fixtures/TL213/switch_off_by_default.py"
    found = {f.start.row: f for f in lint_source(path.read_text(encoding="utf-8"), str(path), select=["TL213"])}
    assert {row: f.severity for row, f in found.items() if row < 40} == {
        22: Severity.NOTE, 28: Severity.NOTE, 30: Severity.NOTE, 32: Severity.NOTE, 33: Severity.WARNING}
    assert "only when `self.remat` is switched on: off by default" in found[22].message


def test_a_resume_branch_keeps_tl211_an_error():
    source = """
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--resume", action="store_true")
        args = parser.parse_args()
        torch.save({"args": args}, "ckpt.pth")
        if args.resume:
            state = torch.load("ckpt.pth")
    """
    assert one(source, "TL211").severity is Severity.ERROR


def test_tl211_resume_of_a_script_that_saves_only_whole_models_is_an_error():
    source = """
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--resume_from", default="")
        parser.add_argument("--cache", default="")
        args = parser.parse_args()
        net = torch.nn.Linear(2, 2)
        if args.resume_from:
            net = torch.load(args.resume_from)
        table = torch.load(args.cache)
        torch.save(table, args.cache)
        for epoch in range(3):
            torch.save(net, f"snap_{epoch}.pt")
    """
    found = {f.start.row: f for f in lint(source, "TL211")}
    assert found[10].severity is Severity.ERROR and "whole nn.Module" in found[10].message
    assert found[11].severity is Severity.NOTE


# -- TL101 / TL102: certain through another file ---------------------------------------------------

def test_tl101_tl102_errors_when_another_project_file_trains_or_moves_an_instance():
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "fixtures/project/class_used_in_sibling/blocks.py"
    found = {f.code: f for f in lint_source(path.read_text(encoding="utf-8"), str(path), select=["TL101", "TL102"])}
    assert found["TL101"].severity is Severity.ERROR and "fit.py:7" in found["TL101"].message
    assert found["TL102"].severity is Severity.ERROR and "fit.py:8" in found["TL102"].message
    assert any(r[0].endswith("fit.py") for r in found["TL101"].related)


def test_tl110_discarded_move_before_an_unmoved_model_is_a_note_without_fix():
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "fixtures/TL110/move_before_unmoved_model.py"
    found = {f.start.row: f for f in lint_source(path.read_text(encoding="utf-8"), str(path), select=["TL110"])}
    assert found[11].severity is Severity.NOTE and found[11].fix is None and "both stay on the CPU" in found[11].message
    assert found[18].severity is Severity.ERROR


def test_a_switch_a_caller_turns_on_is_not_off_by_default():
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "fixtures/TL213/switch_off_by_default.py"
    found = {f.start.row: f for f in lint_source(path.read_text(encoding="utf-8"), str(path), select=["TL213"])}
    assert found[44].severity is Severity.WARNING and "switched on" not in found[44].message
    # passed down from a parameter that is itself off by default (Outer(low_memory=False))
    assert found[59].severity is Severity.NOTE


def test_a_fix_in_a_cell_indented_as_a_whole_is_applied():
    from torchlint.fixer import fix_notebook

    data = _notebook("import torch\nx = torch.randn(3, 4)\n", "    z = x.t().view(-1)\n    w = 1\n")
    rules = [r for r in all_rules() if r.code == "TL004"]
    fixed = fix_notebook("nb.ipynb", data, rules, unsafe=False)
    cells = json.loads(fixed.new)["cells"]
    assert "".join(cells[1]["source"]) == "    z = x.t().contiguous().view(-1)\n    w = 1\n"
