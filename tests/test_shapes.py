"""The shape facet: symbolic dimensions, the layer table, the forward interpreter, the data
pipeline, cross-file models and `torchlint shapes`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchlint.analysis.tensor_shape import contracts as C
from torchlint.analysis.tensor_shape import dims as D
from torchlint.engine import lint_source

REPO = Path(__file__).resolve().parent.parent


def codes(source: str, path: str = "snippet.py"):
    return [(f.code, f.start.row) for f in lint_source(textwrap.dedent(source), path, select=["TL3"])]


# -- dims ----------------------------------------------------------------------------------------

def test_window_formula_matches_floor_and_ceil_modes():
    assert D.window_length(32, 5, 1, 0) == 28
    assert D.window_length(28, 2, 2, 0) == 14
    assert D.window_length(14, 3, 2, 0, ceil=True) == 7
    assert D.window_length(4, 5, 1, 0) == 0


def test_symbolic_flatten_is_a_mismatch_only_when_no_size_fits():
    h = D.window(D.window(D.symbol("H"), 5, 1, 0), 2, 2, 0)
    w = D.window(D.window(D.symbol("W"), 5, 1, 0), 2, 2, 0)
    features = D.mul(16, D.mul(h, w))
    assert D.same(features, 400) is None  # 32×32 gives 16×14×14... any H with (H-4)/2 = 5 fits
    assert D.same(features, 401) is False  # 401 is no multiple of 16
    assert D.same(D.mul(16, D.mul(h, w)), 16 * 7 * 11) is None  # non-square inputs count too


def test_unknown_is_never_a_mismatch():
    assert D.same(None, 3) is None
    assert D.same(D.symbol("N"), 64) is None


# -- contracts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("layer, args, kwargs, shape, expected", [
    ("Conv2d", (3, 6, 5), {}, (2, 3, 32, 32), (2, 6, 28, 28)),
    ("Conv2d", (3, 6, 3), {"padding": "same"}, (2, 3, 9, 9), (2, 6, 9, 9)),
    ("MaxPool2d", (2,), {}, (2, 6, 28, 28), (2, 6, 14, 14)),
    ("Linear", (400, 120), {}, (2, 400), (2, 120)),
    ("LSTM", (10, 20), {"bidirectional": True}, (5, 3, 10), (5, 3, 40)),
    ("Flatten", (), {}, (2, 3, 4, 5), (2, 60)),
    ("ConvTranspose2d", (8, 4, 2), {"stride": 2}, (1, 8, 7, 7), (1, 4, 14, 14)),
])
def test_contract_output_shapes(layer, args, kwargs, shape, expected):
    contract = C.LAYERS[layer]
    assert contract.apply(contract.bind(args, kwargs), shape) == expected


@pytest.mark.parametrize("layer, args, shape, parameter", [
    ("Linear", (400, 120), (2, 576), "in_features"),
    ("Conv2d", (1, 32, 3), (2, 3, 28, 28), "in_channels"),
    ("BatchNorm2d", (64,), (2, 32, 8, 8), "num_features"),
    ("LSTM", (128, 64), (2, 5, 64), "input_size"),
])
def test_contract_misfits_name_the_parameter(layer, args, shape, parameter):
    contract = C.LAYERS[layer]
    misfit = contract.apply(contract.bind(args, {}), shape)
    assert isinstance(misfit, C.Misfit) and misfit.parameter == parameter


def test_every_table_entry_has_a_verify_grid_row():
    from torchlint.verify.cases._shape_table import GRID, missing_rows

    assert set(C.LAYERS) <= {row[0] for row in GRID}
    assert missing_rows() == []


# -- the analysis on programs --------------------------------------------------------------------

def test_message_explains_the_arithmetic_and_fix_writes_the_number():
    source = (REPO / "fixtures/TL301/cifar_kernel_edit.py").read_text()
    [finding] = [f for f in lint_source(source, "fixtures/TL301/cifar_kernel_edit.py", select=["TL301"])]
    assert "CIFAR10 3×32×32 (line 10) → conv1 6×28×28 → pool 6×14×14 → conv2 16×12×12 → pool 16×6×6 → flatten 576" \
        in finding.message
    assert "(4x576 and 400x120)" in finding.message
    assert finding.fix is not None and finding.fix.edits[0].content == "16 * 6 * 6"


def test_a_model_fed_nothing_known_is_silent_where_some_input_fits():
    assert codes("""
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                self.fc = nn.Linear(8 * 30 * 30, 10)
            def forward(self, x):
                return self.fc(self.conv(x).flatten(1))
    """) == []


def test_tensor_factories_and_summary_feed_models():
    source = """
        import torch
        import torch.nn as nn
        from torchsummary import summary
        net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))
        summary(net, (3, 28, 28))
    """
    assert codes(source) == [("TL301", 5)]


def test_a_model_in_another_file_is_reported_at_the_call_that_feeds_it(tmp_path):
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(1, 8, 3)
                self.fc = nn.Linear(8 * 26 * 26, 10)
            def forward(self, x):
                return self.fc(self.conv(x).flatten(1))
    """))
    train = textwrap.dedent("""
        import torch
        from torchvision import datasets, transforms
        from model import Net
        data = datasets.CIFAR10("d", transform=transforms.ToTensor())
        loader = torch.utils.data.DataLoader(data, batch_size=8)
        net = Net()
        for x, y in loader:
            out = net(x)
    """)
    (tmp_path / "train.py").write_text(train)
    findings = lint_source(train, str(tmp_path / "train.py"), select=["TL301"])
    assert [(f.code, f.start.row) for f in findings] == [("TL301", 9)]
    assert "(model.py:6)" in findings[0].message and "expects 1 input channels, gets 3" in findings[0].message


def test_bad_input_does_not_crash_the_analysis():
    assert codes("""
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self, *a, **k):
                super().__init__()
                self.layers = nn.Sequential(*[nn.Linear(4, 4) for _ in range(3)])
                self.fc = nn.Linear(**k)
            def forward(self, x, *rest):
                for layer in self.layers:
                    x = layer(x)
                return self.fc(x)[None, ..., 1:]
        net = Net()
        net(torch.randn(2, 4))
    """) == []


# -- torchlint shapes ----------------------------------------------------------------------------

def _shapes(*args):
    return subprocess.run([sys.executable, "-m", "torchlint", "shapes", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=60)


def test_shapes_command_prints_the_table_and_the_problem():
    result = _shapes("fixtures/TL301/cifar_kernel_edit.py")
    assert result.returncode == 1, result.stderr
    assert "conv2    N×6×14×14   N×16×12×12  19" in result.stdout
    assert "✗ fc1: expects 400 input features, gets 576" in result.stdout


def test_shapes_command_takes_an_input_size():
    result = _shapes("fixtures/TL301/near_misses.py", "--model", "TutorialNet", "--input", "3,32,32")
    assert result.returncode == 0, result.stderr
    assert "fc1      N×400       N×120" in result.stdout


def test_shapes_command_reports_bad_input_in_one_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    result = _shapes(str(broken))
    assert result.returncode == 2 and "cannot parse" in result.stderr and "Traceback" not in result.stderr
    assert _shapes(str(tmp_path / "absent.py")).returncode == 2


def test_no_fix_where_another_input_fits_the_layer():
    source = textwrap.dedent("""
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset
        net = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
        flat = DataLoader(TensorDataset(torch.randn(100, 28, 28), torch.zeros(100)), batch_size=10)
        small = DataLoader(TensorDataset(torch.randn(100, 14, 14), torch.zeros(100)), batch_size=10)
        for x, y in flat:
            out = net(x)
        for x, y in small:
            out = net(x)
    """)
    findings = lint_source(source, "snippet.py", select=["TL301"])
    assert [f.code for f in findings] == ["TL301"]
    assert findings[0].fix is None and "196" in findings[0].message


def test_shapes_command_reads_notebooks(tmp_path):
    import json

    cells = [
        "import torch\nimport torch.nn as nn\n",
        "model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4 * 26 * 26, 10))\n",
        "out = model(torch.randn(2, 1, 28, 28))\n",
    ]
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                          for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "model.ipynb"
    path.write_text(json.dumps(notebook))
    result = _shapes(str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "N×4×26×26" in result.stdout and "output: N×10" in result.stdout


def test_a_layer_file_is_judged_by_the_file_of_its_directory_that_builds_the_model(tmp_path):
    (tmp_path / "setup.py").write_text("")
    parts = textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Block(nn.Module):
            def __init__(self, cin, cout):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3, padding=1)
            def forward(self, x):
                return self.conv(x)
        class Merge(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.conv = nn.Conv2d(channels * 2, channels, 1)
            def forward(self, a, b):
                return self.conv(a + b)
    """)
    (tmp_path / "parts.py").write_text(parts)
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        from parts import Block, Merge
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Block(3, 16)
                self.b = Block(16, 16)
                self.merge = Merge(16)
            def forward(self, x):
                y = self.a(x)
                return self.merge(y, self.b(y))
    """))
    findings = lint_source(parts, str(tmp_path / "parts.py"), select=["TL301"])
    assert [(f.code, f.start.row) for f in findings] == [("TL301", 13)]
    assert "in `merge`" in findings[0].message and "model.py" in findings[0].message
    assert findings[0].fix is None  # `channels * 2` names a parameter other instances set differently


# -- sources the code picks at run time or builds elsewhere ---------------------------------------

def test_datasets_chosen_in_branches_keep_what_every_branch_shares():
    from torchlint.analysis.tensor_shape import inputs as I

    source = textwrap.dedent("""
        import torch
        from torchvision import datasets, transforms
        size = 64
        if choice == "cifar":
            dataset = datasets.CIFAR10("d", transform=transforms.Compose([transforms.Resize(size), transforms.ToTensor()]))
        else:
            dataset = datasets.MNIST("d", transform=transforms.Compose([transforms.Resize(size), transforms.ToTensor()]))
        loader = torch.utils.data.DataLoader(dataset, batch_size=16)
    """)
    import libcst as cst

    from torchlint.analysis.semantic import Semantic
    from torchlint.parsing import parse_module

    sem = Semantic(parse_module(source), path="snippet.py")
    loader = next(c for c in sem.index.nodes(cst.Call) if sem.qualified_name(c.func) == "torch.utils.data.DataLoader")
    found = I.loader_source(sem, loader)
    assert found.sample == (None, 64, 64) and found.batch_size == 16
    assert found.label.startswith("CIFAR10/MNIST ?×64×64")
    # a branch whose dataset is not known makes the whole choice unknown
    unknown = source.replace('datasets.MNIST("d"', 'make_dataset("d"')
    sem = Semantic(parse_module(unknown), path="snippet.py")
    loader = next(c for c in sem.index.nodes(cst.Call) if sem.qualified_name(c.func) == "torch.utils.data.DataLoader")
    assert I.loader_source(sem, loader) is None


def test_a_model_handed_to_a_training_function_is_run_on_the_loader_handed_with_it():
    from torchlint.analysis import project
    from torchlint.analysis.semantic import Semantic
    from torchlint.analysis.tensor_shape import handoff as H
    from torchlint.analysis.tensor_shape import inputs as I
    from torchlint.parsing import parse_module
    import libcst as cst

    path = REPO / "fixtures" / "project" / "model_trained_by_engine" / "train.py"
    module = parse_module(path.read_text(encoding="utf-8"))
    sem = Semantic(module, path=str(path), project=project.for_file(str(path), module))
    fed = {}
    for call in sem.index.nodes(cst.Call):
        for model, loader in H.feeds(sem, call):
            fed[I.short_text(sem, call, 30)] = (model.value, loader.value, I.loader_of(sem, loader).sample)
    assert fed == {
        "engine.train(model, train_loa…": ("model", "train_loader", (3, 64, 64)),
        "engine.train(model=model, tra…": ("model", "big_loader", (3, 128, 128)),
        "engine.evaluate(model, big_lo…": ("model", "big_loader", (3, 128, 128)),
        "engine.train(model, test_load…": ("model", "test_loader", (3, 64, 64)),
        "engine.train(any_size, big_lo…": ("any_size", "big_loader", (3, 128, 128)),
    }  # engine.describe never runs the model on the batches


def test_labels_built_from_the_batch_size_meet_the_output_in_the_loss():
    source = """
        import torch
        import torch.nn as nn
        from torchvision import datasets, transforms
        data = datasets.MNIST("d", transform=transforms.ToTensor())
        loader = torch.utils.data.DataLoader(data, batch_size=32)
        net = nn.Sequential(nn.Flatten(), nn.Linear(784, 1), nn.Sigmoid())
        bce = nn.BCELoss()
        for i, batch in enumerate(loader):
            images = batch[0]
            ones = torch.full((images.size(0),), 1.0)
            loss = bce(net(images), ones)
            right = bce(net(images).squeeze(1), ones)
            zeros = torch.zeros(images.size(0), 1)
            also_right = bce(net(images), zeros)
    """
    assert codes(source) == [("TL305", 12)]
