"""TL111: a method named without `()` is never called."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL111",
        title="model.eval without () leaves Dropout active: two evaluations of one input differ",
        bad="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(8, 1000), nn.Dropout(0.5)).to(DEVICE)
model.eval
x = torch.ones(1, 8, device=DEVICE)
with torch.no_grad():
    differs = (model(x) - model(x)).abs().max().item()
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(8, 1000), nn.Dropout(0.5)).to(DEVICE)
model.eval()
x = torch.ones(1, 8, device=DEVICE)
with torch.no_grad():
    differs = (model(x) - model(x)).abs().max().item()
""",
        bad_line=5,
        probe="value_compare",
        expect={"left": "differs", "op": ">", "right": "0", "show": ["model.training"]},
    ),
    Case(
        rule="TL111",
        title="optimizer.step without () leaves the weights unchanged",
        bad="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
before = model.weight.detach().clone()
loss = model(torch.ones(8, 4, device=DEVICE)).pow(2).mean()
loss.backward()
optimizer.step
moved = (model.weight.detach() - before).abs().max().item()
""",
        good="""\
import torch
import torch.nn as nn

model = nn.Linear(4, 1).to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
before = model.weight.detach().clone()
loss = model(torch.ones(8, 4, device=DEVICE)).pow(2).mean()
loss.backward()
optimizer.step()
moved = (model.weight.detach() - before).abs().max().item()
""",
        bad_line=9,
        probe="value_compare",
        expect={"left": "moved", "op": "==", "right": "0"},
    ),
]
