"""TL003: a loss tensor kept across iterations keeps its autograd graph alive."""

from torchlint.verify.case import Case

MIB = 1024 * 1024

CASES = [
    Case(
        rule="TL003",
        title="losses.append(loss) keeps every iteration's activations alive",
        bad="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(DEVICE)
criterion = nn.MSELoss()
val_losses = []
for step in range(40):
    x = torch.randn(128, 64, device=DEVICE)
    y = torch.randn(128, 1, device=DEVICE)
    loss = criterion(model(x), y)
    val_losses.append(loss)
mean_loss = sum(val_losses) / len(val_losses)
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(DEVICE)
criterion = nn.MSELoss()
val_losses = []
for step in range(40):
    x = torch.randn(128, 64, device=DEVICE)
    y = torch.randn(128, 1, device=DEVICE)
    loss = criterion(model(x), y)
    val_losses.append(loss.item())
mean_loss = sum(val_losses) / len(val_losses)
""",
        bad_line=11,
        probe="graph_retained",
        # 40 iterations' activations are ~6 MiB; the good loop keeps only the last one (its
        # `loss` is still bound), ~0.3 MiB.
        expect={"name": "val_losses", "min_bytes": 2 * MIB},
    ),
    Case(
        rule="TL003",
        title="total_loss += loss chains every iteration into one growing graph",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(16, 1).to(DEVICE)
criterion = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total_loss = 0.0
for step in range(20):
    x = torch.randn(32, 16, device=DEVICE)
    y = torch.randn(32, 1, device=DEVICE)
    opt.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    opt.step()
    total_loss += loss
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(16, 1).to(DEVICE)
criterion = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total_loss = 0.0
for step in range(20):
    x = torch.randn(32, 16, device=DEVICE)
    y = torch.randn(32, 1, device=DEVICE)
    opt.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    opt.step()
    total_loss += loss.item()
""",
        bad_line=15,
        probe="graph_retained",
        # more autograd nodes than iterations: the graph grows with every step
        expect={"name": "total_loss", "min_nodes": 20, "show": ["type(total_loss).__name__"]},
    ),
    Case(
        rule="TL003",
        title="features.append(encoder(batch)) keeps every batch's activations alive",
        bad="""\
import torch
import torch.nn as nn

encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 32)).to(DEVICE)
loader = torch.utils.data.DataLoader(torch.randn(2560, 64), batch_size=128)
features = []
for batch in loader:
    features.append(encoder(batch.to(DEVICE)))
features = torch.cat(features)
""",
        good="""\
import torch
import torch.nn as nn

encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 32)).to(DEVICE)
loader = torch.utils.data.DataLoader(torch.randn(2560, 64), batch_size=128)
features = []
with torch.no_grad():
    for batch in loader:
        features.append(encoder(batch.to(DEVICE)))
features = torch.cat(features)
""",
        bad_line=8,
        probe="graph_retained",
        # 20 batches' saved activations (inputs and ReLU outputs) are ~3 MiB; under no_grad
        # nothing is saved and `features` has no grad_fn.
        expect={"name": "features", "min_bytes": 2 * MIB, "show": ["features.requires_grad"]},
    ),
]
