"""TL120: `p.require_grad = False` freezes nothing."""

from torchlint.verify.case import Case

CASES = [
    Case(
        rule="TL120",
        title="p.require_grad = False leaves the backbone trainable: one SGD step moves it",
        bad="""\
import torch
import torch.nn as nn

backbone = nn.Linear(4, 4).to(DEVICE)
head = nn.Linear(4, 2).to(DEVICE)
before = backbone.weight.detach().clone()
for p in backbone.parameters():
    p.require_grad = False
params = [p for p in list(backbone.parameters()) + list(head.parameters()) if p.requires_grad]
opt = torch.optim.SGD(params, lr=0.1)
loss = head(backbone(torch.randn(8, 4, device=DEVICE))).pow(2).mean()
loss.backward()
opt.step()
moved = not torch.equal(before, backbone.weight.detach())
flag = backbone.weight.requires_grad
""",
        good="""\
import torch
import torch.nn as nn

backbone = nn.Linear(4, 4).to(DEVICE)
head = nn.Linear(4, 2).to(DEVICE)
before = backbone.weight.detach().clone()
for p in backbone.parameters():
    p.requires_grad = False
params = [p for p in list(backbone.parameters()) + list(head.parameters()) if p.requires_grad]
opt = torch.optim.SGD(params, lr=0.1)
loss = head(backbone(torch.randn(8, 4, device=DEVICE))).pow(2).mean()
loss.backward()
opt.step()
moved = not torch.equal(before, backbone.weight.detach())
flag = backbone.weight.requires_grad
""",
        bad_line=8,
        probe="value_compare",
        expect={"left": "moved", "op": "==", "right": "True", "show": ["flag", "len(params)"]},
    ),
]
