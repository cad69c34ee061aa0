"""TL001: in-place operation on a tensor autograd needs."""

from torchlint.verify.case import Case

LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."
SAVED_MESSAGE = ("one of the variables needed for gradient computation has been modified by an "
                 "inplace operation")

CASES = [
    Case(
        rule="TL001",
        title="leaf tensor requiring grad updated in place outside no_grad",
        bad="""\
import torch

w = torch.randn(3, device=DEVICE, requires_grad=True)
loss = (w * 2.0).sum()
loss.backward()
w -= 0.1 * w.grad
""",
        good="""\
import torch

w = torch.randn(3, device=DEVICE, requires_grad=True)
loss = (w * 2.0).sum()
loss.backward()
with torch.no_grad():
    w -= 0.1 * w.grad
""",
        bad_line=6,
        probe="raises",
        expect={"exc": "RuntimeError", "match": LEAF_MESSAGE, "show": ["w.is_leaf", "w.grad_fn"]},
    ),
    Case(
        rule="TL001",
        title="parameters updated in place in a manual SGD loop outside no_grad",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
loss = model(x).pow(2).mean()
loss.backward()
for p in model.parameters():
    p.sub_(0.01 * p.grad)
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
x = torch.randn(8, 4, device=DEVICE)
loss = model(x).pow(2).mean()
loss.backward()
with torch.no_grad():
    for p in model.parameters():
        p.sub_(0.01 * p.grad)
""",
        bad_line=9,
        probe="raises",
        expect={"exc": "RuntimeError", "match": LEAF_MESSAGE, "show": ["model.weight._version"]},
    ),
    Case(
        rule="TL001",
        title="forward() mutates its input in place after sigmoid saved it for backward",
        bad="""\
import torch
import torch.nn as nn


class Scale(nn.Module):
    def forward(self, x):
        x.mul_(2.0)
        return x


layer = nn.Linear(8, 8).to(DEVICE)
scale = Scale()
x = torch.randn(4, 8, device=DEVICE)
h = torch.sigmoid(layer(x))
out = scale(h).sum()
out.backward()
""",
        good="""\
import torch
import torch.nn as nn


class Scale(nn.Module):
    def forward(self, x):
        x = x.clone()
        x.mul_(2.0)
        return x


layer = nn.Linear(8, 8).to(DEVICE)
scale = Scale()
x = torch.randn(4, 8, device=DEVICE)
h = torch.sigmoid(layer(x))
out = scale(h).sum()
out.backward()
""",
        bad_line=7,
        probe="raises",
        expect={"exc": "RuntimeError", "match": SAVED_MESSAGE,
                "show": ["h._version", "layer.weight.grad.norm().item()"]},
    ),
    Case(
        rule="TL001",
        title="forward() mutates the caller's tensor in place",
        bad="""\
import torch
import torch.nn as nn


class Normalize(nn.Module):
    def forward(self, x):
        x.sub_(0.5)
        return x / 0.5


images = torch.rand(2, 3, 4, 4, device=DEVICE)
original = images.clone()
model = nn.Sequential(Normalize(), nn.Flatten(), nn.Linear(48, 10)).to(DEVICE)
with torch.no_grad():
    logits = model(images)
""",
        good="""\
import torch
import torch.nn as nn


class Normalize(nn.Module):
    def forward(self, x):
        x = x.sub(0.5)
        return x / 0.5


images = torch.rand(2, 3, 4, 4, device=DEVICE)
original = images.clone()
model = nn.Sequential(Normalize(), nn.Flatten(), nn.Linear(48, 10)).to(DEVICE)
with torch.no_grad():
    logits = model(images)
""",
        bad_line=7,
        probe="tensor_mutated",
        expect={"name": "images", "baseline": "original"},
    ),
    Case(
        rule="TL001",
        title="copying into a fresh layer's weight raises; into one made with requires_grad_(False) works",
        bad="""\
import torch
import torch.nn as nn


def fuse(conv, bn):
    fused = nn.Conv2d(conv.in_channels, conv.out_channels, 1, bias=True).to(DEVICE)
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
    return fused


fused = fuse(nn.Conv2d(3, 4, 1).to(DEVICE), nn.BatchNorm2d(4).to(DEVICE))
""",
        good="""\
import torch
import torch.nn as nn


def fuse(conv, bn):
    fused = nn.Conv2d(conv.in_channels, conv.out_channels, 1, bias=True).to(DEVICE).requires_grad_(False)
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
    return fused


fused = fuse(nn.Conv2d(3, 4, 1).to(DEVICE), nn.BatchNorm2d(4).to(DEVICE))
""",
        bad_line=8,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "a leaf Variable that requires grad is being used in an in-place operation",
                "show": ["fused.weight.requires_grad"]},
    ),
]
