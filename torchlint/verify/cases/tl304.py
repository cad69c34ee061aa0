"""TL304: a residual sum and a U-Net concatenation of shapes that do not match."""

from torchlint.verify.case import Case

_BLOCK = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(16, 32, 3, 2, 1)
        self.conv2 = nn.Conv2d(32, 32, 3, 1, 1)
        self.shortcut = nn.Conv2d(16, 32, 1, 2)

    def forward(self, x):
        out = self.conv2(F.relu(self.conv1(x)))
        return {join}


block = Block().to(DEVICE)
out = block(torch.randn(2, 16, 32, 32, device=DEVICE))
"""

_UNET = """\
import torch
import torch.nn as nn


class Up(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, padding={padding})
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)

    def forward(self, x):
        skip = self.down(x)
        return torch.cat([skip, self.up(self.pool(skip))], dim=1)


up = Up().to(DEVICE)
out = up(torch.randn(2, 3, 64, 64, device=DEVICE))
"""

CASES = [
    Case(
        rule="TL304",
        title="residual block whose stride and channels changed without a projection",
        bad=_BLOCK.format(join="out + x"),
        good=_BLOCK.format(join="out + self.shortcut(x)"),
        bad_line=15,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "must match the size of tensor b"},
    ),
    Case(
        rule="TL304",
        title="U-Net skip after an unpadded conv on an odd size: torch.cat of 63×63 and 62×62",
        bad=_UNET.format(padding=0).replace("64, 64, device", "65, 65, device"),
        good=_UNET.format(padding=1),
        bad_line=14,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "Sizes of tensors must match except in dimension 1"},
    ),
]

_DOT = """\
import torch

data = [[1, 2], [3, 4]]
tensor = torch.FloatTensor(data).to(DEVICE)
print('torch:', {product})
"""

CASES += [
    Case(
        rule="TL304",
        title="torch.dot of 2-D tensors (a 2017 tutorial's `tensor.dot(tensor)`, which flattened them then)",
        bad=_DOT.format(product="tensor.dot(tensor)"),
        good=_DOT.format(product="tensor @ tensor"),
        bad_line=5,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "1D tensors expected, but got 2D and 2D tensors"},
    ),
    Case(
        rule="TL304",
        title="torch.dot of 1-D tensors of different lengths",
        bad="import torch\n\nscore = torch.dot(torch.tensor([1.0, 2.0, 3.0], device=DEVICE), torch.ones(4, device=DEVICE))\n",
        good="import torch\n\nscore = torch.dot(torch.tensor([1.0, 2.0, 3.0], device=DEVICE), torch.ones(3, device=DEVICE))\n",
        bad_line=3,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "inconsistent tensor size"},
    ),
]
