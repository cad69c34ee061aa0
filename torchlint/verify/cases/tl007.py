"""TL007: a DataLoader batch reaches a model on another device unmoved.

On a CPU-only machine OTHER_DEVICE is "meta" and stands in for the accelerator the model is
moved to (`nn.Linear` and the losses raise the device-mismatch error there); on CUDA the model
goes to the GPU, and the batch stays on the CPU, as a DataLoader yields it.
"""

from torchlint.verify.case import Case

_SETUP = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device(DEVICE if DEVICE != "cpu" else OTHER_DEVICE)
dataset = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
loader = DataLoader(dataset, batch_size=4)
model = nn.Linear(4, 2).to(device)
criterion = nn.CrossEntropyLoss()
"""
_EXPECT = {"exc": "RuntimeError",
           "match": ["Expected all tensors to be on the same device",
                     "is not on the expected device"],
           "show": ["model.weight.device", "data.device", "target.device"]}

CASES = [
    Case(
        rule="TL007",
        title="model moved to the device, DataLoader batch left on the CPU",
        bad=_SETUP + """\
for data, target in loader:
    output = model(data)
    loss = criterion(output, target)
""",
        good=_SETUP + """\
for data, target in loader:
    data, target = data.to(device), target.to(device)
    output = model(data)
    loss = criterion(output, target)
""",
        bad_line=11,
        probe="raises",
        expect=_EXPECT,
    ),
    Case(
        rule="TL007",
        title="input moved, loss target left on the CPU",
        bad=_SETUP + """\
for data, target in loader:
    output = model(data.to(device))
    loss = criterion(output, target)
""",
        good=_SETUP + """\
for data, target in loader:
    output = model(data.to(device))
    loss = criterion(output, target.to(device))
""",
        bad_line=12,
        probe="raises",
        expect={**_EXPECT, "show": ["model.weight.device", "output.device", "target.device"]},
    ),
]
