"""TL128: a module whose forward is nested inside __init__ raises NotImplementedError when called."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL128",
        title="forward nested inside __init__: calling the module raises NotImplementedError",
        bad="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)


net = Net().to(DEVICE)
out = net(torch.randn(3, 4, device=DEVICE))
""",
        good="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


net = Net().to(DEVICE)
out = net(torch.randn(3, 4, device=DEVICE))
""",
        bad_line=10,
        probe="raises",
        expect={"exc": "NotImplementedError", "match": "is missing the required"},
    ),
]
