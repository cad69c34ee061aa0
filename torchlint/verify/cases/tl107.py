"""TL107: an evaluation loop over a model with Dropout/BatchNorm left in training mode."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL107",
        title="Dropout still active when evaluating under no_grad without model.eval()",
        bad="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 2)).to(DEVICE)
batch = torch.randn(8, 16, device=DEVICE)
runs = []
with torch.no_grad():
    for repeat in range(2):
        runs.append(model(batch))
max_difference = (runs[0] - runs[1]).abs().max().item()
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 2)).to(DEVICE)
batch = torch.randn(8, 16, device=DEVICE)
runs = []
model.eval()
with torch.no_grad():
    for repeat in range(2):
        runs.append(model(batch))
max_difference = (runs[0] - runs[1]).abs().max().item()
""",
        bad_line=9,
        probe="value_compare",
        # the same batch evaluated twice: in training mode the outputs differ
        expect={"left": "max_difference", "op": ">", "right": "0", "show": ["model.training"]},
    ),
    Case(
        rule="TL107",
        title="BatchNorm in training mode fails on a single-sample validation batch",
        bad="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
samples = [torch.randn(1, 4, device=DEVICE) for _ in range(3)]
predictions = []
with torch.no_grad():
    for sample in samples:
        predictions.append(model(sample).argmax(dim=1))
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
samples = [torch.randn(1, 4, device=DEVICE) for _ in range(3)]
predictions = []
model.eval()
with torch.no_grad():
    for sample in samples:
        predictions.append(model(sample).argmax(dim=1))
""",
        bad_line=9,
        probe="raises",
        expect={"exc": "ValueError", "match": "Expected more than 1 value per channel when training",
                "show": ["model.training", "len(predictions)"]},
    ),
    Case(
        rule="TL107",
        title="model.eval() in the epoch loop never undone: later epochs train in eval mode",
        bad="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
frozen_steps = 0
for epoch in range(3):
    before = model[1].running_mean.clone()
    optimizer.zero_grad()
    model(torch.randn(16, 4, device=DEVICE) + 3).pow(2).mean().backward()
    optimizer.step()
    frozen_steps += int(torch.equal(before, model[1].running_mean))
    model.eval()
    with torch.no_grad():
        val = model(torch.randn(4, 4, device=DEVICE)).sum().item()
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
frozen_steps = 0
for epoch in range(3):
    model.train()
    before = model[1].running_mean.clone()
    optimizer.zero_grad()
    model(torch.randn(16, 4, device=DEVICE) + 3).pow(2).mean().backward()
    optimizer.step()
    frozen_steps += int(torch.equal(before, model[1].running_mean))
    model.eval()
    with torch.no_grad():
        val = model(torch.randn(4, 4, device=DEVICE)).sum().item()
""",
        bad_line=13,
        probe="value_compare",
        # training steps after which BatchNorm's running mean did not move (3 epochs, 1 step each)
        expect={"left": "frozen_steps", "op": ">", "right": "0", "show": ["model.training"]},
    ),
    Case(
        rule="TL107",
        title="A network run part by part without model.eval(): its Dropout part is still active",
        bad="""\
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(32, 2))

net = Net().to(DEVICE)
batch = torch.randn(8, 16, device=DEVICE)
runs = []
with torch.no_grad():
    for repeat in range(2):
        h = net.features(batch)
        runs.append(net.classifier(h))
max_difference = (runs[0] - runs[1]).abs().max().item()
""",
        good="""\
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(32, 2))

net = Net().to(DEVICE)
batch = torch.randn(8, 16, device=DEVICE)
runs = []
net.eval()
with torch.no_grad():
    for repeat in range(2):
        h = net.features(batch)
        runs.append(net.classifier(h))
max_difference = (runs[0] - runs[1]).abs().max().item()
""",
        bad_line=16,
        probe="value_compare",
        # the same batch through the same parts twice: in training mode the outputs differ
        expect={"left": "max_difference", "op": ">", "right": "0",
                "show": ["net.training", "net.classifier.training"]},
    ),
]
