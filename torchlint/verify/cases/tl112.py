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
