"""TL301: a layer fed an input it was not built for raises at the first forward; plus one case per
row of the layer shape table's grid (`_shape_table`)."""

from torchlint.verify.case import Case
from torchlint.verify.cases._shape_table import cases as shape_table_cases

_CIFAR_NET = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 3)
        self.fc1 = nn.Linear({features}, 120)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc1(torch.flatten(x, 1))


net = Net().to(DEVICE)
out = net(torch.randn(4, 3, 32, 32, device=DEVICE))
"""

_BATCHNORM = """\
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d({features})

    def forward(self, x):
        return torch.relu(self.bn1(self.conv1(x)))


encoder = Encoder().to(DEVICE)
out = encoder(torch.randn(2, 3, 16, 16, device=DEVICE))
"""

_CELLS = """\
import torch
import torch.nn as nn


class Waves(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 64)
        self.linear = nn.Linear(64, 1)

    def forward(self, input):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, device=input.device)
        c_t = torch.zeros(input.size(0), 51, device=input.device)
        h_t2 = torch.zeros(input.size(0), {state}, device=input.device)
        c_t2 = torch.zeros(input.size(0), {state}, device=input.device)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            outputs += [self.linear(h_t2)]
        return torch.cat(outputs, dim=1)


out = Waves().to(DEVICE)(torch.randn(4, 20, device=DEVICE))
"""

_SCRIPT_OP = """\
import torch
import torch.nn as nn
import torch.nn.functional as F

images = torch.rand(10, 3, 28, 28, device=DEVICE)
out = {op}
"""

CASES = [
    Case(
        rule="TL301",
        title="torch.flatten(images, 4) of a 4-D tensor: dim 4 is out of range",
        bad=_SCRIPT_OP.format(op="torch.flatten(images, 4)"),
        good=_SCRIPT_OP.format(op="torch.flatten(images, 1)"),
        bad_line=6,
        probe="raises",
        expect={"exc": "IndexError", "match": "Dimension out of range (expected to be in range of [-4, 3], but got 4)"},
    ),
    Case(
        rule="TL301",
        title="torch.flatten(images, 2, 1): start_dim after end_dim",
        bad=_SCRIPT_OP.format(op="torch.flatten(images, 2, 1)"),
        good=_SCRIPT_OP.format(op="torch.flatten(images, 1, 2)"),
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "start_dim cannot come after end_dim"},
    ),
    Case(
        rule="TL301",
        title="F.log_softmax(images, 4) of a 4-D tensor: dim 4 is out of range",
        bad=_SCRIPT_OP.format(op="F.log_softmax(images, 4)"),
        good=_SCRIPT_OP.format(op="F.log_softmax(images, -1)"),
        bad_line=6,
        probe="raises",
        expect={"exc": "IndexError", "match": "Dimension out of range"},
    ),
    Case(
        rule="TL301",
        title="F.max_pool2d with padding 3 around a 2-wide window",
        bad=_SCRIPT_OP.format(op="F.max_pool2d(images, 2, 2, 3)"),
        good=_SCRIPT_OP.format(op="F.max_pool2d(images, 2, 2, 1)"),
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "pad should be at most half of effective kernel size"},
    ),
    Case(
        rule="TL301",
        title="F.max_pool2d of a 2-D tensor: it takes 3-D or 4-D input",
        bad=_SCRIPT_OP.format(op="F.max_pool2d(images[0, 0], 2)"),
        good=_SCRIPT_OP.format(op="F.max_pool2d(images[0], 2)"),
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "3D or 4D (batch mode) tensor expected for input"},
    ),
    Case(
        rule="TL301",
        title="nn.Dropout2d on a 1-D tensor: feature dropout needs at least 2 dimensions",
        bad=_SCRIPT_OP.format(op="torch.rand(100, device=DEVICE)\ndrop = nn.Dropout2d()\nout = drop(out)"),
        good=_SCRIPT_OP.format(op="images\ndrop = nn.Dropout2d()\nout = drop(out)"),
        bad_line=7,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "Feature dropout requires at least 2 dimensions in the input"},
    ),
    Case(
        rule="TL301",
        title="LSTMCell widened to 64 while its hidden states stay 51 wide: the first step raises",
        bad=_CELLS.format(state=51),
        good=_CELLS.format(state=64),
        bad_line=9,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "hidden0 has inconsistent hidden_size: got 51, expected 64"},
    ),
    Case(
        rule="TL301",
        title="CIFAR tutorial with conv2's kernel changed to 3: fc1 gets 576 features, not 400",
        bad=_CIFAR_NET.format(features="16 * 5 * 5"),
        good=_CIFAR_NET.format(features="16 * 6 * 6"),
        bad_line=12,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "mat1 and mat2 shapes cannot be multiplied (4x576 and 400x120)"},
    ),
    Case(
        rule="TL301",
        title="BatchNorm2d(64) after a 32-channel conv: running_mean of the wrong size",
        bad=_BATCHNORM.format(features="64"),
        good=_BATCHNORM.format(features="32"),
        bad_line=9,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "running_mean should contain 32 elements not 64"},
    ),
] + shape_table_cases()
