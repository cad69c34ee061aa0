"""TL112: a layer built inside forward gets new random weights each call."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL112",
        title="nn.Linear built in forward: no parameters, a different function every call",
        bad="""\
import torch
import torch.nn as nn


class Head(nn.Module):
    def forward(self, h):
        return nn.Linear(h.shape[-1], 8)(h)


head = Head().to(DEVICE)
x = torch.randn(2, 4, device=DEVICE)
differs = (head(x) - head(x)).abs().max().item()
parameters = len(list(head.parameters()))
""",
        good="""\
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)

    def forward(self, h):
        return self.fc(h)


head = Head().to(DEVICE)
x = torch.randn(2, 4, device=DEVICE)
differs = (head(x) - head(x)).abs().max().item()
parameters = len(list(head.parameters()))
""",
        bad_line=7,
        probe="value_compare",
        expect={"left": "differs", "op": ">", "right": "0", "show": ["parameters"]},
    ),
]

CASES.append(
    Case(
        rule="TL112",
        title="BatchNorm1d(affine=False) built in forward: in eval() a sample's output still depends on its batch",
        bad="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, h):
        return nn.BatchNorm1d(4, affine=False)(h)


net = Net().to(DEVICE).eval()
batch = torch.randn(8, 4, device=DEVICE)
other = torch.cat([batch[:1], 5 + torch.randn(7, 4, device=DEVICE)])
depends = (net(batch)[0] - net(other)[0]).abs().max().item()
""",
        good="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4, affine=False)

    def forward(self, h):
        return self.norm(h)


net = Net().to(DEVICE).eval()
batch = torch.randn(8, 4, device=DEVICE)
other = torch.cat([batch[:1], 5 + torch.randn(7, 4, device=DEVICE)])
depends = (net(batch)[0] - net(other)[0]).abs().max().item()
""",
        bad_line=7,
        probe="value_compare",
        expect={"left": "depends", "op": ">", "right": "0"},
    )
)
