"""TL305: loss input/target shapes that raise or broadcast."""

from torchlint.verify.case import Case

_REGRESSION = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

X = torch.randn(256, 8)
y = torch.randn(256)
loader = DataLoader(TensorDataset(X, y), batch_size=32)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(DEVICE)
criterion = nn.MSELoss()
for xb, yb in loader:
    xb, yb = xb.to(DEVICE), yb.to(DEVICE)
    pred = model(xb)
    loss = {loss}
"""

_CLASSIFIER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

mnist = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
loader = DataLoader(mnist, batch_size=64)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
criterion = nn.CrossEntropyLoss()
for images, labels in loader:
    logits = model(images)
    loss = {loss}
"""

_SEGMENTATION = """\
import torch
import torch.nn.functional as F

logits = torch.randn(2, 3, 4, 5, device=DEVICE)
labels = torch.randint(0, 3, {labels}, device=DEVICE)
loss = F.cross_entropy(logits, labels)
"""

CASES = [
    Case(
        rule="TL305",
        title="cross_entropy of (2, 3, 4, 5) scores against (3, 4, 5) labels: the batch sizes differ",
        bad=_SEGMENTATION.format(labels="(3, 4, 5)"),
        good=_SEGMENTATION.format(labels="(2, 4, 5)"),
        bad_line=6,
        probe="raises",
        expect={"exc": "ValueError", "match": "Expected input batch_size (2) to match target batch_size (3)"},
    ),
    Case(
        rule="TL305",
        title="cross_entropy of (2, 3, 4, 5) scores against (2, 5) labels: spatial targets are 3-D",
        bad=_SEGMENTATION.format(labels="(2, 5)"),
        good=_SEGMENTATION.format(labels="(2, 4, 5)"),
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "only batches of spatial targets supported (3D tensors)"},
    ),
    Case(
        rule="TL305",
        title="MSELoss of an (N, 1) output against (N,) targets broadcasts to N×N",
        bad=_REGRESSION.format(loss="criterion(pred, yb)"),
        good=_REGRESSION.format(loss="criterion(pred.squeeze(1), yb)"),
        bad_line=13,
        probe="warns",
        expect={"category": "UserWarning", "match": "Using a target size"},
    ),
    Case(
        rule="TL305",
        title="CrossEntropyLoss with (N, 1) class indices raises",
        bad=_CLASSIFIER.format(loss="criterion(logits, labels.view(-1, 1))"),
        good=_CLASSIFIER.format(loss="criterion(logits, labels)"),
        bad_line=12,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "multi-target not supported"},
        requires=("torchvision",),
        source="torch 2.13 torch/nn/functional.py cross_entropy (the check is torch's own; torchvision only loads MNIST)",
    ),
]
