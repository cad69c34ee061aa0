"""TL106: an evaluation loop that runs the model with autograd on."""

from torchlint.verify.case import Case

MIB = 1024 * 1024

CASES = [
    Case(
        rule="TL106",
        title="model.eval() loop without no_grad keeps every batch's activations",
        bad="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(DEVICE)
model.eval()
outputs = []
for step in range(20):
    batch = torch.randn(128, 64, device=DEVICE)
    outputs.append(model(batch))
predictions = torch.cat(outputs).argmax(dim=1)
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(DEVICE)
model.eval()
outputs = []
with torch.no_grad():
    for step in range(20):
        batch = torch.randn(128, 64, device=DEVICE)
        outputs.append(model(batch))
predictions = torch.cat(outputs).argmax(dim=1)
""",
        bad_line=9,
        probe="graph_retained",
        # 20 batches of saved activations are ~3 MiB; under no_grad nothing is saved
        expect={"name": "outputs", "min_bytes": 1 * MIB, "show": ["outputs[0].requires_grad"]},
    ),
]
