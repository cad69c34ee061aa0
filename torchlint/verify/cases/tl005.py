"""TL005: part of a model moved to a device while the rest stays put.

On CPU-only machines OTHER_DEVICE is "meta", standing in for the accelerator. In the first case
on CUDA, OTHER_DEVICE is "cpu" and the model is built on the GPU (`with device:`), so the moved
part is the odd one out; the second case moves the model to the accelerator (CUDA, or meta on a
CPU-only machine) and the replaced head stays on the CPU.
"""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL005",
        title="submodule moved with .to(device) in __init__, model left on another device",
        bad="""\
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4).to(device)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


device = torch.device(DEVICE)
with device:
    model = Classifier(torch.device(OTHER_DEVICE))
x = torch.randn(2, 8, device=device)
out = model(x)
""",
        good="""\
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


device = torch.device(DEVICE)
model = Classifier().to(device)
x = torch.randn(2, 8, device=device)
out = model(x)
""",
        bad_line=9,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": ["Expected all tensors to be on the same device",
                          "is not on the expected device"],
                "show": ["model.body.weight.device", "model.head.weight.device", "out.shape"]},
    ),
    Case(
        rule="TL005",
        title="head replaced after the whole model was moved stays on the default device",
        bad="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Linear(8, 16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.features(x)))


device = torch.device(DEVICE if DEVICE != "cpu" else OTHER_DEVICE)
model = Net().to(device)
model.fc = nn.Linear(16, 4)
x = torch.randn(2, 8, device=device)
out = model(x)
""",
        good="""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Linear(8, 16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.features(x)))


device = torch.device(DEVICE if DEVICE != "cpu" else OTHER_DEVICE)
model = Net()
model.fc = nn.Linear(16, 4)
model = model.to(device)
x = torch.randn(2, 8, device=device)
out = model(x)
""",
        bad_line=17,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": ["Expected all tensors to be on the same device",
                          "is not on the expected device"],
                "show": ["model.features.weight.device", "model.fc.weight.device", "out.shape"]},
    ),
]
