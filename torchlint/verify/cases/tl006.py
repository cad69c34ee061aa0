"""TL006: forward() caches a tensor it computed on self without detaching it."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL006",
        title="activation cached on self is used in the next step's loss",
        bad="""\
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.last = None

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        self.last = h
        return h


model = Encoder().to(DEVICE)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
previous = None
for step in range(3):
    x = torch.randn(4, 8, device=DEVICE)
    opt.zero_grad()
    h = model(x)
    loss = h.pow(2).mean()
    if previous is not None:
        loss = loss + (h - previous).pow(2).mean()
    loss.backward()
    opt.step()
    previous = model.last
""",
        good="""\
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.last = None

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        self.last = h.detach()
        return h


model = Encoder().to(DEVICE)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
previous = None
for step in range(3):
    x = torch.randn(4, 8, device=DEVICE)
    opt.zero_grad()
    h = model(x)
    loss = h.pow(2).mean()
    if previous is not None:
        loss = loss + (h - previous).pow(2).mean()
    loss.backward()
    opt.step()
    previous = model.last
""",
        bad_line=13,
        probe="raises",
        expect={"exc": "RuntimeError",
                "match": "Trying to backward through the graph a second time",
                "show": ["step", "loss.item()"]},
    ),
    Case(
        rule="TL006",
        title="features cached on self keep the last batch's graph alive",
        bad="""\
import torch
import torch.nn as nn


class FeatureNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 256), nn.ReLU())
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        features = self.body(x)
        self.features = features
        return self.head(features)


model = FeatureNet().to(DEVICE)
predictions = []
for step in range(5):
    batch = torch.randn(256, 64, device=DEVICE)
    predictions.append(model(batch).argmax(dim=1))
""",
        good="""\
import torch
import torch.nn as nn


class FeatureNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 256), nn.ReLU())
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        features = self.body(x)
        self.features = features.detach()
        return self.head(features)


model = FeatureNet().to(DEVICE)
predictions = []
for step in range(5):
    batch = torch.randn(256, 64, device=DEVICE)
    predictions.append(model(batch).argmax(dim=1))
""",
        bad_line=13,
        probe="graph_retained",
        # anything saved for backward still alive after the loop is the cached graph
        expect={"name": "model.features", "min_bytes": 1},
    ),
    Case(
        rule="TL006",
        title="a loss module's stored loss read into the next step fails; read and backpropagated in the same step (style transfer) it trains",
        bad="""\
import torch
import torch.nn as nn
import torch.nn.functional as F


class StyleLoss(nn.Module):
    def __init__(self, target):
        super().__init__()
        self.target = target.detach()

    def forward(self, input):
        self.loss = F.mse_loss(input, self.target)
        return input


style_losses = [StyleLoss(torch.randn(4, device=DEVICE)) for _ in range(2)]
model = nn.Sequential(*style_losses)
img = torch.randn(4, device=DEVICE, requires_grad=True)
previous = None
for step in range(3):
    img.grad = None
    model(img)
    score = sum(sl.loss for sl in style_losses)
    if previous is not None:
        score = score + previous
    score.backward()
    previous = style_losses[0].loss
""",
        good="""\
import torch
import torch.nn as nn
import torch.nn.functional as F


class StyleLoss(nn.Module):
    def __init__(self, target):
        super().__init__()
        self.target = target.detach()

    def forward(self, input):
        self.loss = F.mse_loss(input, self.target)
        return input


style_losses = [StyleLoss(torch.randn(4, device=DEVICE)) for _ in range(2)]
model = nn.Sequential(*style_losses)
img = torch.randn(4, device=DEVICE, requires_grad=True)
optimizer = torch.optim.LBFGS([img])


def closure():
    optimizer.zero_grad()
    model(img)
    score = sum(sl.loss for sl in style_losses)
    score.backward()
    return score


for step in range(2):
    optimizer.step(closure)
""",
        bad_line=12,
        probe="raises",
        expect={"exc": "RuntimeError", "match": "Trying to backward through the graph a second time",
                "show": ["step"]},
    ),
]
