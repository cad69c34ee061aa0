"""TL211 (torch.load's weights_only default), TL212 (0-dim tensors read as sequences) and the
TL201 additions: severity per finding, fixes, the judgement of what a file saves, and notebook
cells that keep what earlier cells define when another cell does not parse."""

from __future__ import annotations

import json
import textwrap

import libcst as cst
import pytest

from torchlint.analysis import checkpoints
from torchlint.analysis.semantic import Semantic
from torchlint.engine import lint_source, select_rules
from torchlint.finding import Applicability, Severity
from torchlint.notebook import lint_notebook

HEAD = "import argparse\nimport numpy as np\nimport torch\nimport torch.nn as nn\n"


def lint(source: str, code: str):
    return [f for f in lint_source(textwrap.dedent(source), select=[code]) if f.code == code]


def severities(source: str, code: str):
    return [(f.start.row, f.severity) for f in lint(source, code)]


def apply_fix(source: str, finding) -> str:
    lines = textwrap.dedent(source).splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    text = "".join(lines)
    for edit in sorted(finding.fix.edits, key=lambda e: (e.start.row, e.start.column), reverse=True):
        start = offsets[edit.start.row - 1] + edit.start.column - 1
        end = offsets[edit.end.row - 1] + edit.end.column - 1
        text = text[:start] + edit.content + text[end:]
    return text


# -- what a file saves ------------------------------------------------------------------------------

@pytest.mark.parametrize("obj, verdict", [
    ("{'args': args, 'model': model.state_dict()}", checkpoints.UNLOADABLE),
    ("{'args': vars(args), 'model': model.state_dict()}", checkpoints.WEIGHTS),
    ("model", checkpoints.UNLOADABLE),
    ("model.state_dict()", checkpoints.WEIGHTS),
    ("optimizer", checkpoints.UNLOADABLE),
    ("optimizer.state_dict()", checkpoints.WEIGHTS),
    ("{'best': np.float64(0.5)}", checkpoints.UNLOADABLE),
    ("{'hist': torch.ones(3).numpy()}", checkpoints.UNLOADABLE),
    ("{'epoch': 3, 'loss': 0.5, 'name': 'x', 't': torch.ones(2), 'l': [1, 2], 'n': None}", checkpoints.WEIGHTS),
    ("[model, model]", checkpoints.UNLOADABLE),
    ("{'x': unknown_thing}", checkpoints.UNKNOWN),
    ("{**extra}", checkpoints.UNKNOWN),
])
def test_saved_content(obj, verdict):
    source = HEAD + ("parser = argparse.ArgumentParser()\nargs = parser.parse_args()\nmodel = nn.Linear(2, 2)\n"
                     "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                     f"torch.save({obj}, 'c.pt')\n")
    sem = Semantic(cst.parse_module(source))
    (save,) = checkpoints.saves(sem)
    assert save.content.verdict == verdict


def test_dict_keys_holding_refused_values():
    source = HEAD + "args = argparse.ArgumentParser().parse_args()\ntorch.save({'args': args, 'epoch': 1}, 'c.pt')\n"
    (save,) = checkpoints.saves(Semantic(cst.parse_module(source)))
    assert save.content.keys == frozenset({"args"})


# -- TL211 severity ---------------------------------------------------------------------------------

def test_tl211_error_when_the_linked_save_is_refused():
    source = HEAD + "model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\nnet = torch.load('m.pt')\n"
    assert severities(source, "TL211") == [(7, Severity.ERROR)]


def test_tl211_warning_when_the_file_saves_a_refused_checkpoint_elsewhere():
    source = HEAD + "model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\ndef f(path):\n    return torch.load(path)\n"
    assert severities(source, "TL211") == [(8, Severity.WARNING)]


def test_tl211_note_when_nothing_is_known_and_silent_for_state_dicts():
    assert severities(HEAD + "weights = torch.load('pretrained.pth')\n", "TL211") == [(5, Severity.NOTE)]
    source = HEAD + "model = nn.Linear(2, 2)\ntorch.save(model.state_dict(), 'w.pt')\nw = torch.load('w.pt')\n"
    assert lint(source, "TL211") == []
    assert lint(HEAD + "model = nn.Linear(2, 2)\nmodel.load_state_dict(torch.load('x.pt'))\n", "TL211") == []


def test_tl211_allowlisted_globals():
    source = HEAD + ("model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
                     "with torch.serialization.safe_globals([nn.Linear]):\n    net = torch.load('m.pt')\n")
    assert lint(source, "TL211") == []  # inside the allowlisting block: an informed choice
    source = HEAD + ("model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
                     "torch.serialization.add_safe_globals([nn.Linear])\nnet = torch.load('m.pt')\n")
    assert severities(source, "TL211") == [(8, Severity.NOTE)]  # allowlisted somewhere: at most a note


def test_tl211_explicit_weights_only_and_kwargs_are_silent():
    for call in ("torch.load('m.pt', weights_only=False)", "torch.load('m.pt', weights_only=True)",
                 "torch.load('m.pt', **kw)"):
        source = HEAD + f"model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\nnet = {call}\n"
        assert lint(source, "TL211") == [], call


def test_tl211_fix_is_unsafe_and_idempotent():
    source = HEAD + "model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\nnet = torch.load('m.pt', map_location='cpu')\n"
    (finding,) = lint(source, "TL211")
    assert finding.fix.applicability == Applicability.UNSAFE
    fixed = apply_fix(source, finding)
    assert "torch.load('m.pt', map_location='cpu', weights_only=False)" in fixed
    assert lint(fixed, "TL211") == []


def test_tl211_fix_keeps_a_trailing_comma():
    source = HEAD + "model = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\nnet = torch.load(\n    'm.pt',\n)\n"
    (finding,) = lint(source, "TL211")
    assert "    'm.pt', weights_only=False,\n)" in apply_fix(source, finding)


# -- TL212 and TL201 --------------------------------------------------------------------------------

def test_tl212_is_an_error_with_an_unsafe_fix():
    source = HEAD + ("criterion = nn.MSELoss()\nloss = criterion(torch.randn(3), torch.randn(3))\n"
                     "value = loss.data.cpu().numpy()[0]\ntotal = sum(loss)\n")
    findings = lint(source, "TL212")
    assert [(f.start.row, f.severity) for f in findings] == [(7, Severity.ERROR), (8, Severity.ERROR)]
    assert findings[0].fix.applicability == Applicability.UNSAFE and findings[1].fix is None
    fixed = apply_fix(source, findings[0])
    assert "value = loss.data.cpu().item()" in fixed
    assert [f.start.row for f in lint(fixed, "TL212")] == [8]


def test_tl201_is_an_error_and_sees_a_reduction_through_a_name():
    source = "import torch\ndef accuracy(pred, y):\n    acc = (pred == y).float().mean()\n    return acc.data[0]\n"
    assert severities(source, "TL201") == [(4, Severity.ERROR)]


# -- notebooks: a cell that does not parse does not cut the others off --------------------------------

def notebook(*cells: str) -> bytes:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [],
                                  "execution_count": None} for c in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 2}).encode()


SETUP = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 3)\ncriterion = nn.CrossEntropyLoss()\n"
LOOP = "for x, y in loader:\n    loss = criterion(model(x), y)\n    print(loss.data[0])\n"


def test_a_cell_keeps_earlier_cells_when_another_does_not_parse():
    data = notebook(SETUP, LOOP, "print 'done'\n")
    found = sorted((f.code, f.cell) for f in lint_notebook("nb.ipynb", data, select_rules(["TL201"])).findings)
    assert found == [("TL201", 2), ("TL901", 3)]


def test_a_cell_that_does_not_parse_forgets_what_it_may_rebind():
    rebinding = "criterion = nn.CrossEntropyLoss(reduction='none')\nprint 'per-sample losses'\n"
    data = notebook(SETUP, rebinding, LOOP)
    found = [(f.code, f.cell) for f in lint_notebook("nb.ipynb", data, select_rules(["TL201"])).findings]
    assert found == [("TL901", 2)]


def test_fixing_a_notebook_with_a_cell_that_does_not_parse():
    from torchlint.fixer import fix_data

    data = notebook(SETUP, LOOP, "print 'done'\n")
    fixed = fix_data("nb.ipynb", data, select_rules(["TL201"]), unsafe=False)
    cells = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
             for c in json.loads(fixed.new)["cells"]]
    assert cells[1].endswith("print(loss.item())\n") and cells[2] == "print 'done'\n" and cells[0] == SETUP
    assert "torchlint-cell" not in fixed.new.decode() and "__torchlint" not in fixed.new.decode()
    assert [(f.code, f.cell) for f in fixed.result.findings if f.code == "TL901"] == [("TL901", 3)]


# -- saves of the project's other files (fixtures/project/sibling_saves_*) --------------------------
from pathlib import Path  # noqa: E402

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "project"


def _project_lint(*paths, cache=None):
    import io
    import tempfile

    from torchlint.cli import main

    with tempfile.TemporaryDirectory() as directory:
        target = Path(directory) / "out.json"
        caching = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
        main(["--exit-zero", "-j", "1", "--select", "TL211", "--output-format", "json", "-o", str(target),
              *caching, *map(str, paths)])
        return json.loads(target.read_text() or "[]")


@pytest.mark.parametrize("path, expected", [
    ("sibling_saves_whole_model/generate.py", [(5, "error")]),
    ("sibling_saves_whole_model/resume.py", [(12, "error"), (13, "note")]),
    ("sibling_saves_whole_model/evaluate.py", [(6, "warning")]),
    ("sibling_saves_state_dict/inspect_checkpoint.py", []),
    ("sibling_saves_other_file/predict.py", [(4, "note")]),
])
def test_load_judged_by_the_saves_of_other_files(path, expected):
    found = _project_lint(PROJECTS / path)
    assert [(f["location"]["row"], f["severity"]) for f in found] == expected


def test_the_message_names_the_other_files_save():
    (generate,) = _project_lint(PROJECTS / "sibling_saves_whole_model" / "generate.py")
    assert "saved at train.py:13 (`torch.save(model, \"net.pt\")`)" in generate["message"]
    assert "holds a whole nn.Module (`model`)" in generate["message"]
    resume = _project_lint(PROJECTS / "sibling_saves_whole_model" / "resume.py")[0]
    assert "saved at train.py:14" in resume["message"] and "an argparse.Namespace (`args`)" in resume["message"]
    (evaluate,) = _project_lint(PROJECTS / "sibling_saves_whole_model" / "evaluate.py")
    assert "if it reads the checkpoint train.py:13 saves" in evaluate["message"]


def test_the_project_layer_off_reads_no_other_file(monkeypatch):
    monkeypatch.setenv("TORCHLINT_NO_PROJECT", "1")
    found = _project_lint(PROJECTS / "sibling_saves_whole_model" / "generate.py")
    assert [f["severity"] for f in found] == ["note"]


def test_editing_the_saving_file_relints_the_loader(tmp_path):
    import shutil

    case = tmp_path / "case"
    shutil.copytree(PROJECTS / "sibling_saves_whole_model", case)
    cache = tmp_path / "cache"

    def severity():
        return [f["severity"] for f in _project_lint(case / "generate.py", cache=cache)]

    assert severity() == ["error"]
    assert severity() == ["error"]  # from the cache
    train = case / "train.py"
    train.write_text(train.read_text().replace('torch.save(model, "net.pt")', 'torch.save(model.state_dict(), "net.pt")'))
    assert severity() == []  # train.py changed: generate.py is linted again; it reads a state dict


@pytest.mark.parametrize("expr, name", [
    ("'out/model.pt'", "model.pt"),
    ("os.path.join(args.dir, 'best.pth')", "best.pth"),
    ("root + '/best.pth'", "best.pth"),
    ("Path(root) / 'best.pth'", "best.pth"),
    ("f'{root}/best.pth'", "best.pth"),
    ("args.save", "model.pt"),
    ("args.resume", None),
    ("'model_%d.pt' % epoch", None),
    ("f'{name}.pt'", None),
    ("'checkpoints/'", None),
    ("opt.model_path", "net.pth"),
])
def test_file_name(expr, name):
    source = ("import os\nimport argparse\nimport torch\n"
              "class Config:\n    model_path = 'checkpoints/net.pth'\n"
              "parser = argparse.ArgumentParser()\nparser.add_argument('--save', default='model.pt')\n"
              "parser.add_argument('--resume', type=str)\nargs = parser.parse_args()\n"
              f"x = {expr}\n")
    sem = Semantic(cst.parse_module(source))
    assign = [s for s in sem.module.body if isinstance(s, cst.SimpleStatementLine)][-1].body[0]
    assert checkpoints.file_name(sem, assign.value) == name
