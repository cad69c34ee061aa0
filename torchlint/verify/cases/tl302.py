"""TL302: `view(-1, K)` where each sample no longer has K values."""

from torchlint.verify.case import Case

_NET = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return {view}


net = Net().to(DEVICE)
out = net(torch.randn(64, 1, 28, 28, device=DEVICE))
"""

CASES = [
    Case(
        rule="TL302",
        title="LeNet's view(-1, 16*5*5) on MNIST's 16×4×4 maps: invalid view",
        bad=_NET.format(view="x.view(-1, 16 * 5 * 5)"),
        good=_NET.format(view="x.view(x.size(0), -1)"),
        bad_line=15,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "is invalid for input of size 16384"},
    ),
]
