"""TL123: dropout that model.eval() cannot switch off."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL123",
        title="nn.Dropout built in forward keeps dropping after model.eval()",
        bad="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return nn.Dropout(0.5)(x)


net = Net().to(DEVICE).eval()
x = torch.ones(4, 64, device=DEVICE)
differs = (net(x) - net(x)).abs().max().item()
zeroed = (net(x) == 0).float().mean().item()
""",
        good="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x)


net = Net().to(DEVICE).eval()
x = torch.ones(4, 64, device=DEVICE)
differs = (net(x) - net(x)).abs().max().item()
zeroed = (net(x) == 0).float().mean().item()
""",
        bad_line=7,
        probe="value_compare",
        expect={"left": "differs", "op": ">", "right": "0", "show": ["zeroed"]},
    ),
    Case(
        rule="TL123",
        title="F.dropout without training= drops after model.eval()",
        bad="""\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5)


net = Net().to(DEVICE).eval()
x = torch.ones(4, 64, device=DEVICE)
differs = (net(x) - net(x)).abs().max().item()
zeroed = (net(x) == 0).float().mean().item()
""",
        good="""\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5, training=self.training)


net = Net().to(DEVICE).eval()
x = torch.ones(4, 64, device=DEVICE)
differs = (net(x) - net(x)).abs().max().item()
zeroed = (net(x) == 0).float().mean().item()
""",
        bad_line=8,
        probe="value_compare",
        expect={"left": "differs", "op": ">", "right": "0", "show": ["zeroed"]},
    ),
]
