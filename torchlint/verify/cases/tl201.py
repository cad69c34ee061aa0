"""TL201: `loss.data[0]` on the 0-dim tensor a loss or a full reduction is since PyTorch 0.4."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL201",
        title="loss.data[0] of a criterion's output (PyTorch 0.3 style)",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 3).to(DEVICE)
criterion = nn.CrossEntropyLoss()
x = torch.randn(8, 4, device=DEVICE)
y = torch.randint(0, 3, (8,), device=DEVICE)
loss = criterion(model(x), y)
total = 0.0
total += loss.data[0]
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 3).to(DEVICE)
criterion = nn.CrossEntropyLoss()
x = torch.randn(8, 4, device=DEVICE)
y = torch.randint(0, 3, (8,), device=DEVICE)
loss = criterion(model(x), y)
total = 0.0
total += loss.item()
""",
        bad_line=10,
        probe="raises",
        expect={"exc": "IndexError", "match": "invalid index of a 0-dim tensor",
                "show": ["loss.dim()", "total"]},
    ),
    Case(
        rule="TL201",
        title="(pred == y).sum().data[0] counting correct predictions",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 3).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
y = torch.randint(0, 3, (8,), device=DEVICE)
_, pred = torch.max(model(x).data, 1)
num_correct = (pred == y).sum()
correct = num_correct.data[0]
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 3).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
y = torch.randint(0, 3, (8,), device=DEVICE)
_, pred = torch.max(model(x).data, 1)
num_correct = (pred == y).sum()
correct = num_correct.item()
""",
        bad_line=9,
        probe="raises",
        expect={"exc": "IndexError", "match": "invalid index of a 0-dim tensor",
                "show": ["num_correct.dim()", "correct"]},
    ),
    Case(
        rule="TL201",
        title="acc.data[0] of (pred == y).float().mean() in a helper whose arguments are unknown",
        bad="""\
import torch


def accuracy(pred, y):
    acc = (pred == y).float().mean()
    return acc.data[0]


pred = torch.tensor([0, 1, 2, 1], device=DEVICE)
y = torch.tensor([0, 1, 1, 1], device=DEVICE)
score = accuracy(pred, y)
""",
        good="""\
import torch


def accuracy(pred, y):
    acc = (pred == y).float().mean()
    return acc.item()


pred = torch.tensor([0, 1, 2, 1], device=DEVICE)
y = torch.tensor([0, 1, 1, 1], device=DEVICE)
score = accuracy(pred, y)
""",
        bad_line=6,
        probe="raises",
        expect={"exc": "IndexError", "match": "invalid index of a 0-dim tensor", "show": ["pred.shape"]},
    ),
]
