"""TL133: an output layer assigned in __init__ and never applied."""

from torchlint.verify.case import Case

_MODEL = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, x):
"""

CASES = [
    Case(
        rule="TL133",
        title="self.out never applied: the model returns 16 hidden features and out gets no gradient",
        bad=_MODEL + """\
        return torch.relu(self.hidden(x))


net = Net().to(DEVICE)
y = net(torch.randn(8, 4, device=DEVICE))
y.pow(2).mean().backward()
untrained = list(net.children())[-1].weight.grad is None
width = y.shape[1]
""",
        good=_MODEL + """\
        return self.out(torch.relu(self.hidden(x)))


net = Net().to(DEVICE)
y = net(torch.randn(8, 4, device=DEVICE))
y.pow(2).mean().backward()
untrained = list(net.children())[-1].weight.grad is None
width = y.shape[1]
""",
        bad_line=9,
        probe="value_compare",
        expect={"left": "untrained", "op": "==", "right": "True", "show": ["width"]},
    ),
]
